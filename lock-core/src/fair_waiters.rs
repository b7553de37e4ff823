//! [`FairWaiters`]: the fair requests of one Locker, counted per key.
//!
//! A fair request takes its queue entry in the store as soon as it starts
//! waiting, so that the store's queue orders it among every process's
//! requests by when it was made. A process-local queue in front of the store
//! would hold it back until its place at the front, behind requests that other
//! processes made after it. So a Locker's fair requests wait side by side,
//! each with its own queue entry. Here they are counted, to bound how many wait
//! at once on one key (as the local queue bounds the other kinds). Their
//! first sends still go one at a time per key, in call order, through a
//! local queue of their own (`LockerInner::fair_sends`).

use std::collections::hash_map::Entry;
use std::sync::Arc;

use crate::backend::key_shards::KeyShards;
use crate::backend::stored_keys::{KeyMap, StoredKeys};

/// The fair requests of one Locker that are waiting for or holding each
/// key (sharded); a key is in the map while it has any.
#[derive(Debug)]
pub(crate) struct FairWaiters {
    map: KeyShards<KeyMap<usize>>,
    max_waiters: usize,
}

/// One fair request's place, from the start of its wait to the end of its
/// lease; dropping it gives the place up.
#[derive(Debug)]
pub(crate) struct FairPlace {
    places: Arc<FairWaiters>,
    keys: StoredKeys,
}

impl FairWaiters {
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(FairWaiters {
            map: KeyShards::default(),
            max_waiters,
        })
    }

    /// A place for a request on `keys`, unless the key already has one
    /// holder and `max_waiters` waiters from this Locker.
    pub(crate) fn take(self: &Arc<Self>, keys: &StoredKeys) -> Option<FairPlace> {
        let mut places = self.map.lock_keys(keys);
        let taken = places.entry(keys.clone()).or_insert(0);
        if *taken > self.max_waiters {
            return None;
        }
        *taken += 1;
        Some(FairPlace {
            places: Arc::clone(self),
            keys: keys.clone(),
        })
    }

    /// Requests on `keys` beyond the first (the one holding or first to
    /// take it, as the local queue counts its waiters).
    pub(crate) fn waiting(&self, keys: &StoredKeys) -> usize {
        let places = self.map.lock_keys(keys);
        places.get(keys).map_or(0, |taken| taken.saturating_sub(1))
    }

    /// Keys with a fair request of this Locker.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn open(&self) -> usize {
        self.map.sum(KeyMap::len)
    }
}

impl Drop for FairPlace {
    fn drop(&mut self) {
        let mut places = self.places.map.lock_keys(&self.keys);
        if let Entry::Occupied(mut taken) = places.entry(self.keys.clone()) {
            *taken.get_mut() -= 1;
            if *taken.get() == 0 {
                taken.remove();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_and_vanish_with_the_last() {
        let places = FairWaiters::new(2);
        let k = StoredKeys::new("lock", "k").unwrap();
        let held: Vec<FairPlace> = (0..3).map(|_| places.take(&k).unwrap()).collect();
        assert_eq!(places.waiting(&k), 2);
        assert!(places.take(&k).is_none(), "over the bound");
        assert_eq!(places.open(), 1);
        drop(held);
        assert_eq!((places.waiting(&k), places.open()), (0, 0));
        drop(places.take(&k).unwrap());
        assert_eq!(places.open(), 0);
    }
}
