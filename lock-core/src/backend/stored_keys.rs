//! User keys: validation, escaping, and the store-neutral name of one lock.
//!
//! A user key such as `order:42` becomes, under namespace `lock`, the base
//! name `lock:{order:42}`. Each kind of lock on the key is a lock of its
//! own, stored under a name beside the base:
//!
//! ```text
//! lock:{order:42}:lease      the plain lock
//! lock:{order:42}:fair       the fair lock
//! lock:{order:42}:rw         the read-write lock (readers and writers)
//! lock:{order:42}:permits    the semaphore
//! lock:{order:42}:segments   the striped lock
//! ```
//!
//! Each store lays out what it keeps under these names in its own folder
//! (Redis's token record and release channel: `backend/redis/keys.rs`).
//! The braces keep all of a lock's names together where a store shards by
//! them (a Redis Cluster hash tag). Every byte of the user key outside
//! `[A-Za-z0-9-_.:/@=+,;]` is written as `%XX`, so `{`, `}`, glob characters
//! (`* ? [ ] \`), whitespace, CRLF and NUL can neither move the key to
//! another shard, nor widen a `SCAN`, ACL or prefix pattern, nor make two
//! user keys collide (the escaping is injective).

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::{Arc, LazyLock};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::error::LockError;
use crate::kind::LockKind;

/// Longest accepted user key, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// Longest accepted namespace, in bytes.
pub const MAX_NAMESPACE_LEN: usize = 64;

/// The store-neutral name of one lock: the user key and the name of its
/// plain lock, from which every other stored name is derived.
///
/// Both live in one shared buffer, so laying them out costs a single
/// allocation per lock and a clone costs none. The lease name's hash is
/// computed once here and reused by every in-process map keyed by the lock
/// (local queues, the memory backend).
#[derive(Debug, Clone)]
pub struct StoredKeys {
    /// `user`, then the lease name.
    names: Arc<str>,
    /// Where the user key ends.
    user_end: usize,
    /// Hash of the lease name under the process-wide random seed.
    hash: u64,
}

/// One random seed per process: hashes of attacker-chosen keys stay
/// unpredictable (SipHash), and each key is hashed once per lock.
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);

thread_local! {
    /// Where names are laid out before being copied into their shared buffer.
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

impl StoredKeys {
    /// Validates `user` and lays out its stored keys under `namespace`.
    pub fn new(namespace: &str, user: &str) -> Result<Self, LockError> {
        validate(user)?;
        SCRATCH.with_borrow_mut(|names| {
            names.clear();
            names.push_str(user);
            let user_end = names.len();
            names.push_str(namespace);
            names.push_str(":{");
            escape_into(names, user);
            names.push_str("}:lease");
            let hash = SEED.hash_one(&names[user_end..]);
            let names = Arc::from(names.as_str());
            Ok(StoredKeys {
                names,
                user_end,
                hash,
            })
        })
    }

    /// The user key, as given.
    pub fn user(&self) -> &str {
        &self.names[..self.user_end]
    }

    /// The plain lock's name (`<namespace>:{<key>}:lease`).
    pub fn lease(&self) -> &str {
        &self.names[self.user_end..]
    }

    /// The base every stored name of the lock starts with
    /// (`<namespace>:{<key>}`).
    pub fn base(&self) -> &str {
        let lease = self.lease();
        &lease[..lease.len() - ":lease".len()]
    }

    /// The name of the lock of `kind` on the key: each kind is a lock of
    /// its own (a read-write lock's readers and writers share one).
    pub fn of_kind(&self, kind: LockKind) -> String {
        let suffix = match kind {
            LockKind::Fair => "fair",
            LockKind::Read | LockKind::Write => "rw",
            LockKind::Permit { .. } => "permits",
            LockKind::Segment { .. } => "segments",
            _ => return self.lease().to_owned(),
        };
        format!("{}:{suffix}", self.base())
    }

    /// The lease name's hash (see [`KeyMap`]).
    pub(crate) fn hash64(&self) -> u64 {
        self.hash
    }
}

impl PartialEq for StoredKeys {
    fn eq(&self, other: &Self) -> bool {
        // Maps are mostly searched with a clone of the key they hold.
        self.hash == other.hash
            && (Arc::ptr_eq(&self.names, &other.names) || self.names == other.names)
    }
}

impl Eq for StoredKeys {}

impl Hash for StoredKeys {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A map keyed by locks that reuses the hash computed in
/// [`StoredKeys::new`] instead of hashing the names again.
pub(crate) type KeyMap<V> = HashMap<StoredKeys, V, BuildHasherDefault<Prehashed>>;

/// Passes on the one `u64` a [`StoredKeys`] writes (already a keyed hash).
#[derive(Default)]
pub(crate) struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only StoredKeys is hashed with this; anything else still spreads.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

/// Checks a user key without laying out its stored names: what
/// [`StoredKeys::new`] refuses, this refuses with the same error.
pub(crate) fn validate(user: &str) -> Result<(), LockError> {
    let reason = if user.is_empty() {
        "the key is empty; derive it from the resource, e.g. `order:42`".to_owned()
    } else if user.len() > MAX_KEY_LEN {
        format!(
            "the key is {} bytes, longer than the limit of {MAX_KEY_LEN}; use a short id of \
             the resource (or a hash of it) as the key",
            user.len()
        )
    } else {
        return Ok(());
    };
    Err(LockError::InvalidKey {
        key: LockError::shown(user),
        reason,
    })
}

/// Checks a namespace: it is written into every stored key unescaped, so it
/// must be plain.
pub(crate) fn validate_namespace(namespace: &str) -> Result<(), LockError> {
    let plain = namespace
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'));
    if namespace.is_empty() || namespace.len() > MAX_NAMESPACE_LEN || !plain {
        return Err(LockError::invalid_config(
            "namespace",
            format!(
                "`{}` must be 1 to {MAX_NAMESPACE_LEN} characters of `A-Za-z0-9-_.:/`",
                LockError::shown(namespace)
            ),
        ));
    }
    Ok(())
}

/// Bytes of a user key that are escaped (`%XX`) in stored names: all but
/// ASCII letters, digits and `-_.:/@=+,;` (every non-ASCII byte is too).
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b':')
    .remove(b'/')
    .remove(b'@')
    .remove(b'=')
    .remove(b'+')
    .remove(b',')
    .remove(b';');

/// Appends `user` to `out`, percent-escaping every byte that is not plain
/// (including `%` itself).
fn escape_into(out: &mut String, user: &str) {
    out.extend(utf8_percent_encode(user, ESCAPED));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_escaped_as_before() {
        // The plain bytes of every release so far; any other is `%XX`.
        let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.:/@=+,;".contains(&b);
        for byte in 0..0x80u8 {
            let user = format!("k{}", byte as char);
            let mut escaped = String::new();
            escape_into(&mut escaped, &user);
            let expected = if plain(byte) {
                user.clone()
            } else {
                format!("k%{byte:02X}")
            };
            assert_eq!(escaped, expected, "byte {byte:#04x}");
        }
        let mut escaped = String::new();
        escape_into(&mut escaped, "é");
        assert_eq!(escaped, "%C3%A9");
    }

    #[test]
    fn plain_keys_stay_readable() {
        let keys = StoredKeys::new("lock", "order:42").unwrap();
        assert_eq!(keys.user(), "order:42");
        assert_eq!(keys.lease(), "lock:{order:42}:lease");
        assert_eq!(keys.base(), "lock:{order:42}");
        assert_eq!(keys.of_kind(LockKind::Exclusive), "lock:{order:42}:lease");
        assert_eq!(keys.of_kind(LockKind::Fair), "lock:{order:42}:fair");
        assert_eq!(keys.of_kind(LockKind::Write), "lock:{order:42}:rw");
        let permit = LockKind::Permit { of: 3 };
        assert_eq!(keys.of_kind(permit), "lock:{order:42}:permits");
    }

    #[test]
    fn hostile_bytes_are_escaped() {
        let keys = StoredKeys::new("lock", "a{b}*?[x]\\\r\n\0%").unwrap();
        assert_eq!(
            keys.lease(),
            "lock:{a%7Bb%7D%2A%3F%5Bx%5D%5C%0D%0A%00%25}:lease"
        );
        assert_eq!(keys.user(), "a{b}*?[x]\\\r\n\0%");
    }

    #[test]
    fn escaping_is_injective_on_near_misses() {
        let a = StoredKeys::new("lock", "%7B").unwrap();
        let b = StoredKeys::new("lock", "{").unwrap();
        assert_ne!(a.lease(), b.lease());
    }

    #[test]
    fn empty_and_oversized_keys_are_refused() {
        assert!(matches!(
            StoredKeys::new("lock", ""),
            Err(LockError::InvalidKey { .. })
        ));
        let huge = "k".repeat(1 << 20);
        let err = StoredKeys::new("lock", &huge).unwrap_err();
        assert!(err.to_string().contains("1048576 bytes"), "{err}");
    }

    #[test]
    fn namespaces_must_be_plain() {
        assert!(validate_namespace("lock").is_ok());
        assert!(validate_namespace("app{x}").is_err());
        assert!(validate_namespace("").is_err());
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10_000))]

            #[test]
            fn any_key_is_laid_out_or_refused_without_panicking(user in "\\PC{0,40}|[\\x00-\\x7f]{0,40}") {
                if let Ok(keys) = StoredKeys::new("lock", &user) {
                    prop_assert_eq!(keys.user(), user.as_str());
                    // Nothing a key holds can leave the hash tag, widen a
                    // pattern or split a command.
                    let tagged = &keys.lease()["lock:{".len()..keys.lease().len() - "}:lease".len()];
                    let hostile = ['{', '}', '*', '?', '[', ']', '\\', '\r', '\n', '\0'];
                    prop_assert!(!tagged.contains(hostile), "{}", tagged);
                }
            }

            #[test]
            fn two_keys_share_stored_names_only_if_equal(a in "[a{%7B}:*]{1,6}", b in "[a{%7B}:*]{1,6}") {
                let (one, two) = (StoredKeys::new("lock", &a).unwrap(), StoredKeys::new("lock", &b).unwrap());
                prop_assert_eq!(one.lease() == two.lease(), a == b);
                prop_assert_eq!(one.base() == two.base(), a == b);
            }
        }
    }
}
