//! Per-key state spread over a fixed set of mutexes, so tasks on distinct
//! keys on different threads seldom meet on one lock.

use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard, PoisonError};

const SHARDS: usize = 16;

#[derive(Debug)]
pub(crate) struct Sharded<T> {
    shards: Box<[Mutex<T>]>,
    hasher: RandomState,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Sharded {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
        }
    }
}

impl<T> Sharded<T> {
    /// The shard that holds `key`.
    pub(crate) fn shard_of(&self, key: &str) -> usize {
        self.hasher.hash_one(key) as usize % self.shards.len()
    }

    /// Locks shard `shard`. Every user keeps its state consistent across a
    /// panic (single inserts and removes), so a poisoned lock is still used.
    pub(crate) fn lock(&self, shard: usize) -> MutexGuard<'_, T> {
        self.shards[shard]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks the shard that holds `key`.
    pub(crate) fn lock_key(&self, key: &str) -> MutexGuard<'_, T> {
        self.lock(self.shard_of(key))
    }

    /// Sums `f` over every shard, locking one at a time.
    pub(crate) fn sum(&self, f: impl Fn(&T) -> usize) -> usize {
        (0..self.shards.len()).map(|i| f(&self.lock(i))).sum()
    }
}
