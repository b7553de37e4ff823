//! Owner values: one per acquisition, never per process or thread.
//!
//! `<process id>:<pid>:<sequence>`, where the process id is 64 random bits
//! drawn once per process (pids repeat across machines and restarts) and the
//! sequence numbers each acquisition once. A delayed renewal or release of an
//! old acquisition therefore never matches a newer one, even in the same
//! process.
//!
//! Threads take sequence numbers in blocks, so that taking a lock touches no
//! counter that another thread writes.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use arrayvec::ArrayString;

/// `<process id>:<pid>:`, the start of every owner value of this process.
static PREFIX: LazyLock<ArrayString<INLINE>> = LazyLock::new(|| {
    let mut bytes = [0u8; 8];
    // Without an OS random source, fall back on time and pid: still unique
    // per process in practice, and the sequence keeps acquisitions apart.
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        bytes = (nanos ^ u64::from(std::process::id()).rotate_left(32)).to_le_bytes();
    }
    let mut prefix = ArrayString::new();
    // 16 hex digits, a pid of at most 10 digits and two colons fit.
    let _ = write!(
        prefix,
        "{:016x}:{}:",
        u64::from_le_bytes(bytes),
        std::process::id()
    );
    prefix
});

static SEQUENCE: AtomicU64 = AtomicU64::new(1);

/// Sequence numbers a thread takes at a time.
const BLOCK: u64 = 1024;

thread_local! {
    /// The rest of this thread's block: next number, end (exclusive).
    static BLOCK_LEFT: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A sequence number no other acquisition of this process has.
fn sequence() -> u64 {
    BLOCK_LEFT.with(|left| {
        let (mut next, mut end) = left.get();
        if next == end {
            next = SEQUENCE.fetch_add(BLOCK, Ordering::Relaxed);
            end = next + BLOCK;
        }
        left.set((next + 1, end));
        next
    })
}

/// Room for an owner value: 16 hex digits, a pid and a 64-bit sequence
/// with their separators need at most 48 bytes.
const INLINE: usize = 48;

/// An owner value kept inline (no allocation; one is made on every lock),
/// as a string that needs no check when read.
#[derive(Clone, Copy)]
pub(crate) struct Owner(ArrayString<INLINE>);

impl Owner {
    /// A copy of `value` if it fits inline.
    pub(crate) fn copy_of(value: &str) -> Option<Owner> {
        ArrayString::from(value).ok().map(Owner)
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// A fresh owner value.
pub(crate) fn next() -> Owner {
    let mut owner = *PREFIX;
    // The prefix leaves room for 20 digits: writing cannot fail.
    let _ = write!(owner, "{}", sequence());
    Owner(owner)
}

#[cfg(test)]
mod tests {
    #[test]
    fn owner_values_fit_inline_at_their_longest() {
        let longest = format!("{:016x}:{}:{}", u64::MAX, u32::MAX, u64::MAX);
        assert_eq!(longest.len(), super::INLINE);
        let copy = super::Owner::copy_of(&longest).unwrap();
        assert_eq!(copy.as_str(), longest);
        assert!(super::Owner::copy_of(&format!("{longest}x")).is_none());
    }

    #[test]
    fn owner_values_are_unique_per_acquisition() {
        let (a, b) = (super::next(), super::next());
        let (a, b) = (a.as_str(), b.as_str());
        assert_ne!(a, b);
        assert_eq!(a.rsplit_once(':').unwrap().0, b.rsplit_once(':').unwrap().0);
        let (sa, sb) = (a.rsplit_once(':').unwrap().1, b.rsplit_once(':').unwrap().1);
        assert!(sb.parse::<u64>().unwrap() > sa.parse::<u64>().unwrap());
    }

    #[test]
    fn threads_never_share_an_owner_value() {
        let per_thread: Vec<Vec<String>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..3000)
                            .map(|_| super::next().as_str().to_owned())
                            .collect()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let all: std::collections::HashSet<&String> = per_thread.iter().flatten().collect();
        // Several blocks per thread (3000 > 1024), none given out twice.
        assert_eq!(all.len(), 4 * 3000);
    }
}
