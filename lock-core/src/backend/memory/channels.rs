//! Release channels of the memory store: one per key with waiters, gone
//! with its last subscriber.

use std::sync::{Arc, Weak};

use tokio::sync::watch;

use super::{MemoryBackend, Shards};
use crate::backend::ReleaseSignal;
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;

#[derive(Debug)]
pub(super) struct Channel {
    pub(super) releases: watch::Sender<u64>,
    subscribers: usize,
}

impl MemoryBackend {
    /// A signal of the releases of `keys`, on the channel shared by its
    /// waiters.
    pub(super) fn subscribe_now(&self, keys: &StoredKeys) -> Result<ReleaseSignal, StoreError> {
        let shard = self.store.shards.shard_of(keys);
        let mut state = self.store.shards.lock(shard);
        let channel = state
            .channels
            .entry(keys.clone())
            .or_insert_with(|| Channel {
                releases: watch::channel(0).0,
                subscribers: 0,
            });
        channel.subscribers += 1;
        let releases = channel.releases.subscribe();
        let registration = Registration {
            store: Arc::downgrade(&self.store),
            shard,
            keys: keys.clone(),
        };
        Ok(ReleaseSignal::new(releases, registration))
    }
}

/// Removes a channel when its last subscriber goes.
struct Registration {
    store: Weak<Shards>,
    shard: usize,
    keys: StoredKeys,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(store) = self.store.upgrade() else {
            return;
        };
        let mut state = store.shards.lock(self.shard);
        if let Some(ch) = state.channels.get_mut(&self.keys) {
            ch.subscribers -= 1;
            if ch.subscribers == 0 {
                state.channels.remove(&self.keys);
            }
        }
    }
}
