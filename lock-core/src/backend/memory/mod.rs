//! The embedded in-process backend: the same lease, token and release
//! semantics as Redis, for single-process apps, demos and tests of user code.

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use self::channels::Channel;
use self::entries::Released;
use self::fair::FairQueue;
use self::permits::Permits;
use self::rw::ReadWrite;
use super::{Attempt, Grant, LockStore, ReleaseSignal, StoreFuture};
use crate::backend::key_shards::KeyShards;
use crate::backend::stored_keys::{KeyMap, StoredKeys};
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection, Pattern};
use crate::kind::LockKind;
use crate::owner::Owner;
use crate::token::FencingToken;

mod channels;
mod entries;
mod fair;
mod inspect;
mod permits;
mod rw;

/// Leases kept in this process.
///
/// Leases expire at their ttl exactly as in Redis (an unrenewed lease ends,
/// a waiter wakes on release or at the holder's remaining time); tokens come
/// from a counter per shard of keys, so they strictly increase per key (as
/// fencing needs; tokens of different keys are not ordered). No
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
    store: Arc<Shards>,
}

/// Leases and channels sharded by lease key (a lock's channel lives in its
/// lease's shard); tokens from a counter per shard, so that threads taking
/// locks on different keys share no counter.
#[derive(Debug, Default)]
struct Shards {
    shards: KeyShards<State>,
}

#[derive(Debug)]
struct State {
    leases: KeyMap<HeldLease>,
    /// The other kinds of lock, each apart from the others (see
    /// [`entries`]).
    fair: KeyMap<FairQueue>,
    rw: KeyMap<ReadWrite>,
    permits: KeyMap<Permits>,
    segments: KeyMap<Permits>,
    channels: KeyMap<Channel>,
    attempts_since_sweep: usize,
    /// The newest token minted in this shard.
    last_token: u64,
}

impl Default for State {
    fn default() -> Self {
        // Start from the wall clock (in microseconds) like the Redis
        // backend, so tokens of a fresh store are above those of an earlier
        // one in the same process; from there, one step per token.
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        State {
            leases: KeyMap::default(),
            fair: KeyMap::default(),
            rw: KeyMap::default(),
            permits: KeyMap::default(),
            segments: KeyMap::default(),
            channels: KeyMap::default(),
            attempts_since_sweep: 0,
            last_token: now,
        }
    }
}

#[derive(Debug)]
struct HeldLease {
    owner: HeldBy,
    token: FencingToken,
    expires: Instant,
}

/// The owner value of a lease: inline when it fits (this crate's always
/// do), else on the heap.
#[derive(Debug)]
enum HeldBy {
    Inline(Owner),
    Heap(Box<str>),
}

impl HeldBy {
    fn new(owner: &str) -> Self {
        Owner::copy_of(owner).map_or_else(|| HeldBy::Heap(owner.into()), HeldBy::Inline)
    }

    fn as_str(&self) -> &str {
        match self {
            HeldBy::Inline(inline) => inline.as_str(),
            HeldBy::Heap(heap) => heap,
        }
    }

    fn is(&self, owner: &str) -> bool {
        match self {
            HeldBy::Inline(inline) => inline.as_str() == owner,
            HeldBy::Heap(heap) => &**heap == owner,
        }
    }
}

/// Sweep expired leases after this many acquire attempts.
const SWEEP_EVERY: usize = 1024;

impl MemoryBackend {
    /// An empty store. Lockers built on clones of one `MemoryBackend` share
    /// its locks, as processes share a server.
    ///
    /// ```
    /// use lock_core::Locker;
    /// use lock_core::backend::MemoryBackend;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), lock_core::LockError> {
    /// let store = MemoryBackend::new();
    /// let a = Locker::builder().backend(store.clone())?;
    /// let b = Locker::builder().backend(store)?;
    /// let held = a.lock("order:42").await?;
    /// assert!(b.try_lock("order:42").await?.is_none(), "one store, one holder");
    /// held.release().await
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Ends the lease on `keys` at once, as if it had expired or been
    /// taken away: for testing how code reacts to a lost lease (its holder
    /// sees it lost at the next renewal). Every kind of lock on the key goes
    /// (fair queue, read-write holders, permits, segments). Returns whether
    /// anything was there.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use lock_core::backend::MemoryBackend;
    /// use lock_core::{LockError, Locker};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), LockError> {
    /// let store = MemoryBackend::new();
    /// let locker = Locker::builder().backend(store.clone())?;
    /// let guard = locker.lock("order:42").ttl(Duration::from_secs(1)).await?;
    /// assert!(store.evict(&locker.stored_keys("order:42")?));
    /// // The holder hears of it at its next renewal, within a third of the ttl.
    /// let lost = guard.lost().await;
    /// assert!(matches!(lost, LockError::Lost { .. }), "{lost:?}");
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "test-util")]
    pub fn evict(&self, keys: &StoredKeys) -> bool {
        self.lock_state(keys).remove_every_kind(keys)
    }

    fn lock_state(&self, keys: &StoredKeys) -> MutexGuard<'_, State> {
        self.store.shards.lock_keys(keys)
    }
}

impl State {
    fn sweep_if_due(&mut self, now: Instant) {
        self.attempts_since_sweep += 1;
        if self.attempts_since_sweep >= SWEEP_EVERY {
            self.attempts_since_sweep = 0;
            self.leases.retain(|_, l| l.expires > now);
            self.sweep_entries(now);
        }
    }

    fn publish(&mut self, keys: &StoredKeys) {
        if self.channels.is_empty() {
            return;
        }
        if let Some(ch) = self.channels.get(keys) {
            ch.releases.send_modify(|n| *n += 1);
        }
    }
}

// The store's operations, answered in place under the shard's mutex.
impl MemoryBackend {
    fn acquire_now(
        &self,
        keys: &StoredKeys,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        state.sweep_if_due(now);
        if let Some(held) = state.leases.get_mut(keys).filter(|held| held.expires > now) {
            if held.owner.is(owner) {
                // Ours, from an earlier try of this acquire: it starts now.
                held.expires = now + ttl;
                return Ok(Attempt::Acquired(Grant::new(held.token, ttl)));
            }
            let remaining = held.expires.saturating_duration_since(now);
            return Ok(Attempt::Held {
                remaining: Some(remaining),
            });
        }
        // Free, or held by a lease that has expired.
        state.last_token += 1;
        let token = FencingToken::new(state.last_token);
        let lease = HeldLease {
            owner: HeldBy::new(owner),
            token,
            expires: now + ttl,
        };
        state.leases.insert(keys.clone(), lease);
        Ok(Attempt::Acquired(Grant::new(token, ttl)))
    }

    fn renew_now(&self, keys: &StoredKeys, owner: &str, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        match state.leases.get_mut(keys) {
            Some(lease) if lease.expires > now && lease.owner.is(owner) => {
                lease.expires = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release_now(&self, keys: &StoredKeys, owner: &str) -> Result<bool, StoreError> {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        // Taken out at once: the common case is the owner's release.
        let Some((stored, lease)) = state.leases.remove_entry(keys) else {
            return Ok(false);
        };
        let live = lease.expires > now;
        let ours = live && lease.owner.is(owner);
        if ours {
            state.publish(keys);
        } else if live {
            // Another owner's lease: put back as it was.
            state.leases.insert(stored, lease);
        }
        Ok(ours)
    }

    /// Takes a lease of another kind than exclusive (see [`entries`]).
    fn acquire_entry(
        &self,
        keys: &StoredKeys,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        state.sweep_if_due(now);
        let attempt = state.on_entries(keys, kind, true, now, |entries, mint| {
            entries.acquire(kind, owner, ttl, now, mint)
        });
        attempt.unwrap_or_else(|| Err(StoreError::unsupported(kind)))
    }

    fn renew_entry(&self, keys: &StoredKeys, kind: LockKind, owner: &str, ttl: Duration) -> bool {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        let renewed = state.on_entries(keys, kind, false, now, |entries, _| {
            entries.renew(owner, ttl, now)
        });
        renewed.unwrap_or(false)
    }

    fn release_entry(&self, keys: &StoredKeys, kind: LockKind, owner: &str) -> bool {
        let now = Instant::now();
        let mut state = self.lock_state(keys);
        let released = state.on_entries(keys, kind, false, now, |entries, _| {
            entries.release(owner, now)
        });
        let Released { had, wakes } = released.unwrap_or_default();
        if wakes {
            state.publish(keys);
        }
        had
    }
}

impl LockStore for MemoryBackend {
    /// Every kind of lock the crate has.
    fn supports(&self, _: LockKind) -> bool {
        true
    }

    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::ready(match kind {
            LockKind::Exclusive => self.acquire_now(keys, owner, ttl),
            other => self.acquire_entry(keys, other, owner, ttl),
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::ready(match kind {
            LockKind::Exclusive => self.renew_now(keys, owner, ttl),
            other => Ok(self.renew_entry(keys, other, owner, ttl)),
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::ready(match kind {
            LockKind::Exclusive => self.release_now(keys, owner),
            other => Ok(self.release_entry(keys, other, owner)),
        })
    }

    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        _: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        self.lock_state(keys).publish(keys);
        StoreFuture::ready(Ok(()))
    }

    /// One signal per key: a process's line has a single head at the store.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        _: LockKind,
        _: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::ready(self.subscribe_now(keys))
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::ready(Ok(self.inspect_now(keys)))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::ready(Ok(self.held_keys_now(namespace, pattern)))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::ready(Ok(self.force_release_now(keys)))
    }

    fn answers_in_place(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}
