//! Owner values: one per acquisition, never per process or thread.
//!
//! `<label>:<process nonce>:<pid>:<sequence>`, where the label names the
//! host or service for operators (the Locker's
//! [`label`](crate::LockerBuilder::label), the host name by default), the
//! process nonce is 64 random bits drawn once per process (pids repeat across
//! machines and restarts) and the sequence numbers each acquisition once. A
//! delayed renewal or release of an old acquisition therefore never matches
//! a newer one, even in the same process.
//!
//! Threads take sequence numbers in blocks, so that taking a lock touches no
//! counter that another thread writes.
//!
//! An election's candidate adds the value it publishes, percent-encoded:
//! `<label>:<process nonce>:<pid>:<sequence>:<value>`. The store keeps it
//! with the lease, so whoever reads the holder reads the value: nothing is
//! stored apart that could outlive or precede the leadership.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};

use arrayvec::ArrayString;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// Longest label, in bytes.
pub const MAX_LABEL_LEN: usize = 32;

/// `<process nonce>:<pid>:`, the part of every owner value of this process
/// after the label.
static PROCESS: LazyLock<ArrayString<48>> = LazyLock::new(|| {
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

/// Room for an owner value: a label, 16 hex digits, a pid and a 64-bit
/// sequence with their separators need at most 32 + 1 + 48 bytes.
const INLINE: usize = 96;

/// The start of the owner values of one Locker: `<label>:<process nonce>:<pid>:`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnerPrefix(ArrayString<INLINE>);

impl OwnerPrefix {
    /// The prefix for `label`, which [`check_label`] accepted.
    pub(crate) fn new(label: &str) -> Self {
        let mut prefix = ArrayString::new();
        let _ = write!(prefix, "{label}:{}", &*PROCESS);
        OwnerPrefix(prefix)
    }
}

/// Whether `label` can name owners: 1 to [`MAX_LABEL_LEN`] ASCII letters,
/// digits, `.`, `_` or `-` (nothing a store's key, node name or value
/// separates on).
pub(crate) fn check_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= MAX_LABEL_LEN
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The host name, as a label: its plain characters, at most
/// [`MAX_LABEL_LEN`]; `host` if none is known. Read once per process.
pub(crate) fn default_label() -> String {
    static LABEL: LazyLock<String> = LazyLock::new(|| {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_default();
        let label: String = name
            .trim()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            .take(MAX_LABEL_LEN)
            .collect();
        if label.is_empty() {
            "host".to_owned()
        } else {
            label
        }
    });
    LABEL.clone()
}

/// Who an owner value belongs to, for people: `<label>/pid <pid>`; `None`
/// for a value not made here.
pub fn process_of(owner: &str) -> Option<String> {
    let mut parts = owner.split(':');
    let (label, _, pid) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_some() && pid.parse::<u32>().is_ok()).then(|| format!("{label}/pid {pid}"))
}

/// The Locker label of an owner value made here (`<label>:...`); `None`
/// for a value not made here.
pub fn label_of(owner: &str) -> Option<&str> {
    process_of(owner)?;
    owner.split(':').next()
}

/// Longest value an election's candidate publishes, in bytes.
pub const MAX_VALUE_LEN: usize = 256;

/// What a published value keeps as it is: letters, digits, `.`, `_` and
/// `-`, which no store separates on (the `:` of an owner value, the `/` of
/// a path, the `|` of a record).
const PUBLISHED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'.').remove(b'_').remove(b'-');

/// An owner value: kept inline (no allocation; one is made on every lock),
/// or shared when it carries a published value; a string that needs no
/// check when read.
#[derive(Clone)]
pub(crate) enum Owner {
    Inline(ArrayString<INLINE>),
    Published(Arc<str>),
}

impl Owner {
    /// A copy of `value` if it fits inline.
    pub(crate) fn copy_of(value: &str) -> Option<Owner> {
        ArrayString::from(value).ok().map(Owner::Inline)
    }

    pub(crate) fn as_str(&self) -> &str {
        match self {
            Owner::Inline(inline) => inline,
            Owner::Published(shared) => shared,
        }
    }
}

/// `value` as an owner value carries it.
pub(crate) fn published(value: &str) -> Arc<str> {
    utf8_percent_encode(value, PUBLISHED).to_string().into()
}

/// The value an owner value made here carries, if any.
pub(crate) fn value_of(owner: &str) -> Option<String> {
    let mut parts = owner.splitn(5, ':');
    let (_, _, pid, sequence, encoded) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    (pid.parse::<u32>().is_ok() && sequence.parse::<u64>().is_ok())
        .then(|| percent_decode_str(encoded).decode_utf8_lossy().into_owned())
}

impl std::fmt::Debug for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

/// A fresh owner value, carrying `published` (a value [`published`]
/// encoded) if given.
pub(crate) fn next(prefix: &OwnerPrefix, published: Option<&str>) -> Owner {
    let mut owner = prefix.0;
    // The prefix leaves room for 20 digits: writing cannot fail.
    let _ = write!(owner, "{}", sequence());
    match published {
        None => Owner::Inline(owner),
        Some(value) => Owner::Published(format!("{owner}:{value}").into()),
    }
}

#[cfg(test)]
mod tests {
    fn next() -> super::Owner {
        super::next(&super::OwnerPrefix::new("test-host"), None)
    }

    #[test]
    fn published_values_survive_every_store_s_separators() {
        let prefix = super::OwnerPrefix::new("test-host");
        let value = "http://10.0.0.7:8080/a|b c%d é";
        let encoded = super::published(value);
        assert!(!encoded.contains([':', '/', '|', ' ']), "{encoded}");
        let owner = super::next(&prefix, Some(&encoded));
        assert_eq!(super::value_of(owner.as_str()).as_deref(), Some(value));
        let pid = std::process::id();
        assert_eq!(
            super::process_of(owner.as_str()),
            Some(format!("test-host/pid {pid}"))
        );
        assert_eq!(super::value_of(next().as_str()), None);
        assert_eq!(super::value_of("l:n:1:2:"), Some(String::new()));
        // Another tool's owner value is not read as carrying one.
        assert_eq!(super::value_of("a:b:c:d:e"), None);
    }

    #[test]
    fn owner_values_fit_inline_at_their_longest() {
        let label = "l".repeat(super::MAX_LABEL_LEN);
        let longest = format!("{label}:{:016x}:{}:{}", u64::MAX, u32::MAX, u64::MAX);
        assert!(longest.len() <= super::INLINE);
        let copy = super::Owner::copy_of(&longest).unwrap();
        assert_eq!(copy.as_str(), longest);
        assert!(super::Owner::copy_of(&"x".repeat(super::INLINE + 1)).is_none());
    }

    #[test]
    fn owner_values_name_their_process() {
        let owner = next();
        let pid = std::process::id();
        assert_eq!(
            super::process_of(owner.as_str()),
            Some(format!("test-host/pid {pid}"))
        );
        assert_eq!(super::process_of("someone else"), None);
        assert!(super::check_label(&super::default_label()));
        assert!(
            !super::check_label("a:b") && !super::check_label("") && !super::check_label("a b")
        );
    }

    #[test]
    fn owner_values_are_unique_per_acquisition() {
        let (a, b) = (next(), next());
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
                .map(|_| scope.spawn(|| (0..3000).map(|_| next().as_str().to_owned()).collect()))
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let all: std::collections::HashSet<&String> = per_thread.iter().flatten().collect();
        // Several blocks per thread (3000 > 1024), none given out twice.
        assert_eq!(all.len(), 4 * 3000);
    }
}
