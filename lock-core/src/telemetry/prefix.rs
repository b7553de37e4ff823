//! The `prefix` label of the per-key metrics: a key's first part, from a
//! set one process keeps bounded, since keys come from outside input.

use std::collections::HashSet;
use std::sync::{Arc, OnceLock, RwLock};

use metrics::SharedString;

/// Most distinct `prefix` values one process reports; the keys of any
/// further prefix are reported as [`OTHER`].
pub(crate) const MAX_PREFIXES: usize = 64;

/// Longest `prefix` value, in bytes (cut at a character's boundary).
const MAX_PREFIX_LEN: usize = 48;

/// The `prefix` of keys past [`MAX_PREFIXES`].
const OTHER: &str = "other";

/// The prefixes seen so far, shared by every Locker of the process.
fn seen() -> &'static RwLock<HashSet<Arc<str>>> {
    static SEEN: OnceLock<RwLock<HashSet<Arc<str>>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// The part of `key` before its first `:` (all of it without one), at most
/// [`MAX_PREFIX_LEN`] bytes: `order` for `order:42`.
fn first_part(key: &str) -> &str {
    let part = key.split(':').next().unwrap_or(key);
    if part.len() <= MAX_PREFIX_LEN {
        return part;
    }
    let mut end = MAX_PREFIX_LEN;
    while !part.is_char_boundary(end) {
        end -= 1;
    }
    &part[..end]
}

/// The `prefix` label value of `key`.
pub(crate) fn label(key: &str) -> SharedString {
    let part = first_part(key);
    let shared = |part: &Arc<str>| SharedString::from(Arc::clone(part));
    // A poisoned set only held an insert that panicked: still a valid set.
    if let Some(known) = seen().read().unwrap_or_else(|e| e.into_inner()).get(part) {
        return shared(known);
    }
    let mut known = seen().write().unwrap_or_else(|e| e.into_inner());
    if let Some(found) = known.get(part) {
        return shared(found);
    }
    if known.len() >= MAX_PREFIXES {
        return SharedString::const_str(OTHER);
    }
    let part: Arc<str> = Arc::from(part);
    known.insert(Arc::clone(&part));
    shared(&part)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_part_of_a_key_is_its_prefix() {
        assert_eq!(first_part("order:42"), "order");
        assert_eq!(first_part("order:42:line:7"), "order");
        assert_eq!(first_part("scheduler"), "scheduler");
        assert_eq!(first_part(":x"), "");
        let long = "é".repeat(40);
        assert_eq!(first_part(&long).len(), MAX_PREFIX_LEN);
    }

    #[test]
    fn prefixes_past_the_bound_are_other() {
        for n in 0..MAX_PREFIXES * 2 {
            let _ = label(&format!("bound-test-{n}:1"));
        }
        assert_eq!(seen().read().unwrap().len(), MAX_PREFIXES);
        assert_eq!(&*label("never-seen-before:1"), OTHER);
    }
}
