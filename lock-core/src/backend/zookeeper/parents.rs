//! [`Parents`]: the parent nodes a backend has seen exist, so that a new
//! key's first node is made with its parent in one request, and a known
//! key's with one create.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// Parents remembered at most; past it the set starts over (a forgotten
/// parent costs one failed multi-create, not a wrong answer).
const MOST: usize = 4096;

/// The parents seen to exist (a container the server may since have
/// removed: a create under it fails with "no node" and makes it again).
#[derive(Default)]
pub(super) struct Parents(Mutex<HashSet<String>>);

impl Parents {
    pub(super) fn known(&self, parent: &str) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(parent)
    }

    pub(super) fn seen(&self, parent: &str) {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= MOST {
            known.clear();
        }
        known.insert(parent.to_owned());
    }

    pub(super) fn gone(&self, parent: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(parent);
    }
}
