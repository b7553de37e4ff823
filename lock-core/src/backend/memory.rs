//! The embedded in-process backend: the same lease, token and release
//! semantics as Redis, for single-process apps, demos and tests of user code.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{Attempt, Backend, BoxFuture, ReleaseSignal};
use crate::error::StoreError;
use crate::keys::StoredKeys;
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
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    leases: HashMap<String, HeldLease>,
    channels: HashMap<String, Channel>,
    last_token: u64,
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
        self.lock_state().leases.len()
    }

    /// Ends the lease on `keys` at once, as if it had expired or been
    /// taken away: for testing how code reacts to a lost lease (its holder
    /// sees it lost at the next renewal). Returns whether a lease was there.
    pub fn evict(&self, keys: &StoredKeys) -> bool {
        self.lock_state().leases.remove(&keys.lease).is_some()
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under a panic (every update is a
        // single insert or remove), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn live<'s>(&'s mut self, lease_key: &str, now: Instant) -> Option<&'s HeldLease> {
        if self.leases.get(lease_key).is_some_and(|l| l.expires <= now) {
            self.leases.remove(lease_key);
        }
        self.leases.get(lease_key)
    }

    fn mint(&mut self) -> FencingToken {
        // Start from the wall clock like the Redis backend, so tokens of a
        // fresh store are above those of an earlier one in the same process.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        self.last_token = (self.last_token + 1).max(now);
        FencingToken::new(self.last_token)
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
            let mut state = self.lock_state();
            if let Some(held) = state.live(&keys.lease, now) {
                if held.owner == owner {
                    return Ok(Attempt::Acquired(held.token));
                }
                let remaining = held.expires.saturating_duration_since(now);
                return Ok(Attempt::Held {
                    remaining: Some(remaining),
                });
            }
            let token = state.mint();
            state.sweep_if_due(now);
            state.leases.insert(
                keys.lease.clone(),
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
            let mut state = self.lock_state();
            state.live(&keys.lease, now);
            match state.leases.get_mut(&keys.lease) {
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
            let mut state = self.lock_state();
            let ours = state
                .live(&keys.lease, now)
                .is_some_and(|l| l.owner == owner);
            if ours {
                state.leases.remove(&keys.lease);
                state.publish(&keys.channel);
            }
            Ok(ours)
        })
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> BoxFuture<'a, Result<ReleaseSignal, StoreError>> {
        Box::pin(async move {
            let mut state = self.lock_state();
            let channel = state
                .channels
                .entry(keys.channel.clone())
                .or_insert_with(|| Channel {
                    releases: watch::channel(0).0,
                    subscribers: 0,
                });
            channel.subscribers += 1;
            let releases = channel.releases.subscribe();
            let registration = Registration {
                state: Arc::downgrade(&self.state),
                channel: keys.channel.clone(),
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
    state: Weak<Mutex<State>>,
    channel: String,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(state) = self.state.upgrade() else {
            return;
        };
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(ch) = state.channels.get_mut(&self.channel) {
            ch.subscribers -= 1;
            if ch.subscribers == 0 {
                state.channels.remove(&self.channel);
            }
        }
    }
}
