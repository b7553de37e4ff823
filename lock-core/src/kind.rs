//! [`LockKind`]: the kind of lock one acquisition asks for.

use std::fmt;

/// What one acquisition asks for on a key.
///
/// A [`LockStore`](crate::backend::LockStore) says which kinds it can keep
/// ([`LockStore::supports`](crate::backend::LockStore::supports)); a lock asking a store
/// for a kind it cannot keep fails with
/// [`LockError::Unsupported`](crate::LockError::Unsupported) before any
/// request is sent, never with a weaker lock in its place.
///
/// ```
/// use lock_core::LockKind;
///
/// assert_eq!(LockKind::Permit { of: 4 }.to_string(), "semaphore");
/// assert!(LockKind::Exclusive.is_exclusive());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// One holder at a time, in no particular order (the plain lock).
    Exclusive,
    /// One holder at a time, granted in the order requests reached the
    /// store.
    Fair,
    /// Shared with other readers; excludes a writer.
    Read,
    /// Excludes readers and other writers.
    Write,
    /// One of `of` permits (a semaphore).
    Permit {
        /// How many holders the key admits at once.
        of: u32,
    },
    /// Any one free segment of `of` (a striped lock).
    Segment {
        /// How many segments the key has.
        of: u32,
    },
}

impl LockKind {
    /// Whether the kind excludes every other holder of the key.
    pub fn is_exclusive(self) -> bool {
        matches!(self, LockKind::Exclusive | LockKind::Fair | LockKind::Write)
    }
}

/// The kind's name, as in "memory does not support fair locks".
impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockKind::Exclusive => f.write_str("exclusive"),
            LockKind::Fair => f.write_str("fair"),
            LockKind::Read => f.write_str("read"),
            LockKind::Write => f.write_str("write"),
            LockKind::Permit { .. } => f.write_str("semaphore"),
            LockKind::Segment { .. } => f.write_str("striped"),
        }
    }
}
