//! The embedded in-process backend: the same lease, token and release
//! semantics as Redis, for single-process apps, demos and tests of user code.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Backend, BoxFuture, ReleaseSignal};
use crate::error::StoreError;
use crate::keys::StoredKeys;
use crate::sharded::Sharded;
use crate::token::FencingToken;

/// Leases kept in this process.
///
/// Leases expire at their ttl exactly as in Redis (an unrenewed lease ends,
/// a waiter wakes on release or at the holder's remaining time); tokens come
/// from one counter, so they strictly increase per key and across keys. No
/// entry outlives its lease: expired leases are swept as the map grows.
///
/// ```
/// use lock_core::Locker;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), lock_core::LockError> {
/// let locker = Locker::memory();
/// let guard = locker.lock("report:daily").await?;
/// assert!(guard.is_held());
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryBackend {
    store: Arc<Store>,
}

/// Leases and channels sharded by lease key (a lock's channel lives in its
/// lease's shard); tokens from one counter across shards.
#[derive(Debug, Default)]
struct Store {
    shards: Sharded<State>,
    last_token: AtomicU64,
}

impl Store {
    fn mint(&self) -> FencingToken {
        // Start from the wall clock like the Redis backend, so tokens of a
        // fresh store are above those of an earlier one in the same process.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let next = |last: u64| (last + 1).max(now);
        let last = self
            .last_token
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| Some(next(last)))
            .unwrap_or_else(|last| last);
        FencingToken::new(next(last))
    }
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<String, HeldLease>,
    channels: HashMap<String, Channel>,
    inserts_since_sweep: usize,
}

#[derive(Debug)]
struct HeldLease {
    owner: String,
    token: FencingToken,
    expires: Instant,
}

#[derive(Debug)]
struct Channel {
    releases: watch::Sender<u64>,
    subscribers: usize,
}

/// Sweep expired leases after this many inserts.
const SWEEP_EVERY: usize = 1024;

impl MemoryBackend {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of leases currently stored (held or expired but not yet swept).
    pub fn stored_leases(&self) -> usize {
        self.store.shards.sum(|state| state.leases.len())
    }

    /// Ends the lease on `keys` at once, as if it had expired or been
    /// taken away: for testing how code reacts to a lost lease (its holder
    /// sees it lost at the next renewal). Returns whether a lease was there.
    pub fn evict(&self, keys: &StoredKeys) -> bool {
        self.lock_state(keys).leases.remove(keys.lease()).is_some()
    }

    fn lock_state(&self, keys: &StoredKeys) -> MutexGuard<'_, State> {
        self.store.shards.lock_key(keys.lease())
    }
}

impl State {
    fn live<'s>(&'s mut self, lease_key: &str, now: Instant) -> Option<&'s HeldLease> {
        if self.leases.get(lease_key).is_some_and(|l| l.expires <= now) {
            self.leases.remove(lease_key);
        }
        self.leases.get(lease_key)
    }

    fn sweep_if_due(&mut self, now: Instant) {
        self.inserts_since_sweep += 1;
        if self.inserts_since_sweep >= SWEEP_EVERY {
            self.inserts_since_sweep = 0;
            self.leases.retain(|_, l| l.expires > now);
        }
    }

    fn publish(&mut self, channel: &str) {
        if let Some(ch) = self.channels.get(channel) {
            ch.releases.send_modify(|n| *n += 1);
        }
    }
}

impl Backend for MemoryBackend {
    fn try_acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Attempt, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut state = self.lock_state(keys);
            if let Some(held) = state.live(keys.lease(), now) {
                if held.owner == owner {
                    return Ok(Attempt::Acquired(held.token));
                }
                let remaining = held.expires.saturating_duration_since(now);
                return Ok(Attempt::Held {
                    remaining: Some(remaining),
                });
            }
            let token = self.store.mint();
            state.sweep_if_due(now);
            state.leases.insert(
                keys.lease().to_owned(),
                HeldLease {
                    owner: owner.to_owned(),
                    token,
                    expires: now + ttl,
                },
            );
            Ok(Attempt::Acquired(token))
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut state = self.lock_state(keys);
            state.live(keys.lease(), now);
            match state.leases.get_mut(keys.lease()) {
                Some(lease) if lease.owner == owner => {
                    lease.expires = now + ttl;
                    Ok(true)
                }
                _ => Ok(false),
            }
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let now = Instant::now();
            let mut state = self.lock_state(keys);
            let ours = state
                .live(keys.lease(), now)
                .is_some_and(|l| l.owner == owner);
            if ours {
                state.leases.remove(keys.lease());
                state.publish(keys.channel());
            }
            Ok(ours)
        })
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> BoxFuture<'a, Result<ReleaseSignal, StoreError>> {
        Box::pin(async move {
            let shard = self.store.shards.shard_of(keys.lease());
            let mut state = self.store.shards.lock(shard);
            let channel = state
                .channels
                .entry(keys.channel().to_owned())
                .or_insert_with(|| Channel {
                    releases: watch::channel(0).0,
                    subscribers: 0,
                });
            channel.subscribers += 1;
            let releases = channel.releases.subscribe();
            let registration = Registration {
                store: Arc::downgrade(&self.store),
                shard,
                channel: keys.channel().to_owned(),
            };
            Ok(ReleaseSignal::new(releases, registration))
        })
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}

/// Removes a channel when its last subscriber goes.
struct Registration {
    store: Weak<Store>,
    shard: usize,
    channel: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(store) = self.store.upgrade() else {
            return;
        };
        let mut state = store.shards.lock(self.shard);
        if let Some(ch) = state.channels.get_mut(&self.channel) {
            ch.subscribers -= 1;
            if ch.subscribers == 0 {
                state.channels.remove(&self.channel);
            }
        }
    }
}
