//! What the operators' calls answer with: the holders of a key
//! ([`Inspection`], [`Holder`]; its waiters are in `waiters.rs`) and the
//! glob that picks held keys ([`Pattern`]). The calls themselves are in
//! `operators.rs`.

use std::time::Duration;

use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::Waiters;

/// Most keys [`Locker::held_keys`](crate::Locker::held_keys) returns.
pub const MAX_LISTED: usize = 10_000;

/// A pattern of user keys: `*` matches any run of characters, `?` one.
#[derive(Debug, Clone)]
pub struct Pattern(wildmatch::WildMatch);

impl Pattern {
    /// The pattern `pattern`.
    pub fn new(pattern: &str) -> Self {
        Pattern(wildmatch::WildMatch::new(pattern))
    }

    /// Whether `key` matches.
    pub fn matches(&self, key: &str) -> bool {
        self.0.matches(key)
    }
}

/// The user key and kind of a stored name of namespace `namespace`
/// (`<namespace>:{<escaped key>}:<kind>`), if it names one.
#[cfg_attr(
    not(any(
        feature = "redis",
        feature = "etcd",
        feature = "zookeeper",
        feature = "postgres"
    )),
    allow(dead_code)
)]
pub(crate) fn user_key_of(stored: &str, namespace: &str) -> Option<String> {
    let rest = stored.strip_prefix(namespace)?.strip_prefix(":{")?;
    let (escaped, kind) = rest.split_once('}')?;
    // etcd's entries follow the name: `<name>/<entry>`.
    let kind = kind.split('/').next()?;
    let holds = matches!(kind, ":lease" | ":fair" | ":rw" | ":permits" | ":segments");
    let user = percent_encoding::percent_decode_str(escaped)
        .decode_utf8()
        .ok()?;
    holds.then(|| user.into_owned())
}

/// What the store holds for one key, every kind of lock on it together.
///
/// ```
/// use lock_core::Locker;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::builder().label("payments-7f9c").memory()?;
/// let guard = locker.lock("order:42").await?;
/// let seen = locker.inspect("order:42").await?;
/// let holder = &seen.holders[0];
/// assert_eq!(holder.token, guard.token());
/// assert_eq!(
///     holder.process(),
///     Some(format!("payments-7f9c/pid {}", std::process::id()))
/// );
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The user key.
    pub key: String,
    /// Every live holder, of every kind of lock on the key.
    pub holders: Vec<Holder>,
    /// Who waits for the key, as far as the store can tell.
    pub waiters: Waiters,
}

impl Inspection {
    /// Nothing held and no queue entry.
    pub fn new(key: impl Into<String>) -> Self {
        Inspection {
            key: key.into(),
            holders: Vec::new(),
            waiters: Waiters::default(),
        }
    }

    /// Whether anyone holds the key.
    pub fn is_held(&self) -> bool {
        !self.holders.is_empty()
    }
}

/// What [`Locker::force_release`](crate::Locker::force_release) removed.
///
/// ```
/// use lock_core::Locker;
/// use lock_core::backend::MemoryBackend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// // Two processes' Lockers on one store.
/// let store = MemoryBackend::new();
/// let wedged = Locker::builder().backend(store.clone())?;
/// let operator = Locker::builder().backend(store)?;
/// let stuck = wedged.lock("order:42").await?;
/// let forced = operator.force_release("order:42").await?;
/// assert_eq!(forced.removed, 1);
/// assert_eq!(forced.tokens_up_to, Some(stuck.token()));
/// // Granted after it: a higher token, and kept.
/// let next = operator.lock("order:42").await?;
/// assert!(Some(next.token()) > forced.tokens_up_to);
/// # next.release().await
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceReleased {
    /// The holders and queue entries removed.
    pub removed: usize,
    /// A token at least as high as every removed holder's, and below the
    /// token of every grant of the key after the force-release (`None`
    /// when nothing was removed): a holder with a higher token was granted
    /// after it, and keeps its grant.
    pub tokens_up_to: Option<FencingToken>,
}

impl ForceReleased {
    /// `removed` entries, the highest token among them `tokens_up_to` (none
    /// if it is 0 or nothing was removed).
    pub fn new(removed: usize, tokens_up_to: Option<FencingToken>) -> Self {
        ForceReleased {
            removed,
            // Queue entries alone carry no token.
            tokens_up_to: tokens_up_to.filter(|token| removed > 0 && token.get() > 0),
        }
    }
}

/// One holder of a key, as the store records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The kind of lock held.
    pub kind: LockKind,
    /// The owner value: one per acquisition (see [`process`](Self::process)).
    pub owner: String,
    /// The fencing token of the acquisition.
    pub token: FencingToken,
    /// Time left on the lease unless renewed, where the store says.
    pub remaining: Option<Duration>,
    /// Time since the lock was granted, where the store says.
    pub age: Option<Duration>,
    /// The segment held, for a striped lock.
    pub segment: Option<u32>,
}

impl Holder {
    /// A holder of `kind` by `owner` with `token`.
    pub fn new(kind: LockKind, owner: impl Into<String>, token: FencingToken) -> Self {
        Holder {
            kind,
            owner: owner.into(),
            token,
            remaining: None,
            age: None,
            segment: None,
        }
    }

    /// With the time left on its lease.
    pub fn remaining(mut self, remaining: Duration) -> Self {
        self.remaining = Some(remaining);
        self
    }

    /// With the time since its grant.
    pub fn age(mut self, age: Duration) -> Self {
        self.age = Some(age);
        self
    }

    /// With the segment it holds.
    pub fn segment(mut self, segment: u32) -> Self {
        self.segment = Some(segment);
        self
    }

    /// The process that holds it, `<label>/pid <pid>` (see
    /// [`LockerBuilder::label`](crate::LockerBuilder::label)); `None` for an
    /// owner value lock-core did not make.
    pub fn process(&self) -> Option<String> {
        crate::owner::process_of(&self.owner)
    }

    /// The holding Locker's [`label`](crate::LockerBuilder::label); `None`
    /// for an owner value lock-core did not make.
    pub fn label(&self) -> Option<&str> {
        crate::owner::label_of(&self.owner)
    }
}
