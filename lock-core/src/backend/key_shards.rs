//! Per-key state spread over a fixed set of mutexes, so tasks on distinct
//! keys on different threads seldom meet on one lock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crossbeam_utils::CachePadded;

use crate::backend::stored_keys::StoredKeys;

/// Shards per [`KeyShards`].
pub(crate) const SHARDS: usize = 16;

#[derive(Debug)]
pub(crate) struct KeyShards<T> {
    /// Each alone on its cache lines: threads working on neighbouring
    /// shards do not pass a line back and forth.
    shards: Box<[CachePadded<Mutex<T>>]>,
}

impl<T: Default> Default for KeyShards<T> {
    fn default() -> Self {
        KeyShards {
            shards: (0..SHARDS).map(|_| CachePadded::default()).collect(),
        }
    }
}

impl<T> KeyShards<T> {
    /// The shard that holds `keys`. Bits 32 and up: the maps inside a shard
    /// index by the low bits and tag by the top ones of the same hash.
    pub(crate) fn shard_of(&self, keys: &StoredKeys) -> usize {
        (keys.hash64() >> 32) as usize % self.shards.len()
    }

    /// Locks shard `shard`. Every user keeps its state consistent across a
    /// panic (single inserts and removes), so a poisoned lock is still used.
    pub(crate) fn lock(&self, shard: usize) -> MutexGuard<'_, T> {
        self.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks the shard that holds `keys`.
    pub(crate) fn lock_keys(&self, keys: &StoredKeys) -> MutexGuard<'_, T> {
        self.lock(self.shard_of(keys))
    }

    /// Sums `f` over every shard, locking one at a time.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn sum(&self, f: impl Fn(&T) -> usize) -> usize {
        (0..self.shards.len()).map(|i| f(&self.lock(i))).sum()
    }
}
