//! The store boundary: the [`Backend`] trait the Locker holds, and the
//! stores. A store reached over the network implements [`Store`] (the lock
//! operations) and [`Operators`] (the operators' calls) as async functions,
//! and is a [`Backend`] through them (see [`Store`] for why); the
//! in-process [`MemoryBackend`] implements [`Backend`] itself.
//!
//! A backend does four things with one lock, each atomically in its store:
//! try to take a lease for a [`LockKind`] (minting a fencing token), renew it,
//! release it, and tell waiters about releases. It answers an attempt with
//! a [`Grant`] (token, the ttl it gave, the segment), with "held", or with
//! "queued": a queue entry now stands in the store for the waiter, who refreshes
//! it by asking again and withdraws it by releasing. Everything above it -
//! the guard, the watchdog, waiting, local queueing, reentrancy - is
//! store-agnostic. The
//! stored names of a lock share one Redis Cluster hash slot (see
//! [`StoredKeys`]), so the Redis scripts also run on a cluster connection
//! ([`RedisBackend::with_connection`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::watch;

use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;

mod attempt;
mod backoff;
#[cfg(feature = "etcd")]
mod etcd;
pub(crate) mod key_shards;
pub mod memory;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
mod queued;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
mod redlock;
mod store;
pub(crate) mod stored_keys;
#[cfg(feature = "zookeeper")]
mod zookeeper;

pub use self::attempt::{Attempt, Grant};
pub(crate) use self::backoff::{Backoff, release_until};
#[cfg(feature = "etcd")]
pub use self::etcd::EtcdBackend;
pub use self::memory::MemoryBackend;
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresBackend;
#[cfg(feature = "redis")]
pub use self::redis::{RedisBackend, RedisConnection};
#[cfg(feature = "redis")]
pub use self::redlock::RedLockBackend;
pub use self::store::{Operators, Store};
pub use self::stored_keys::StoredKeys;
#[cfg(feature = "zookeeper")]
pub use self::zookeeper::ZooKeeperBackend;
pub use crate::error::{Applied, Refusal, StoreError};
pub use crate::inspect::Pattern;

/// What a [`Backend`] method returns: an answer the store already gave (a
/// store in this process answers in place, and then nothing is allocated)
/// or a boxed future for one that has to be awaited.
///
/// ```
/// use lock_core::backend::StoreFuture;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let now: StoreFuture<'_, u32> = StoreFuture::ready(7);
/// let later: StoreFuture<'_, u32> = StoreFuture::new(async { 8 });
/// assert_eq!(now.await + later.await, 15);
/// # }
/// ```
#[must_use = "a StoreFuture of a remote store does nothing until awaited"]
pub struct StoreFuture<'a, T>(Answer<'a, T>);

enum Answer<'a, T> {
    Ready(Option<T>),
    Pending(BoxFuture<'a, T>),
}

impl<'a, T> StoreFuture<'a, T> {
    /// An answer known now.
    pub fn ready(value: T) -> Self {
        StoreFuture(Answer::Ready(Some(value)))
    }

    /// An answer `future` will give (boxed).
    pub fn new(future: impl Future<Output = T> + Send + 'a) -> Self {
        StoreFuture(Answer::Pending(Box::pin(future)))
    }

    /// The answer if it is known without awaiting, else the future back.
    pub fn into_ready(self) -> Result<T, Self> {
        match self.0 {
            Answer::Ready(Some(value)) => Ok(value),
            other => Err(StoreFuture(other)),
        }
    }
}

// The answer is moved out, never pinned in place.
impl<T> Unpin for StoreFuture<'_, T> {}

impl<T> Future for StoreFuture<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut self.get_mut().0 {
            Answer::Ready(value) => {
                Poll::Ready(value.take().expect("StoreFuture polled after completion"))
            }
            Answer::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> std::fmt::Debug for StoreFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.0 {
            Answer::Ready(_) => "ready",
            Answer::Pending(_) => "pending",
        };
        f.debug_tuple("StoreFuture").field(&state).finish()
    }
}

/// A subscription to the releases of one lock.
///
/// Created before a waiter retries, so a release that happens between the
/// retry and the wait is not missed: every release bumps a counter, and
/// [`ReleaseSignal::released`] returns once it moved since the last call.
pub struct ReleaseSignal {
    releases: watch::Receiver<u64>,
    _registration: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for ReleaseSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseSignal")
            .field("releases", &*self.releases.borrow())
            .finish_non_exhaustive()
    }
}

impl ReleaseSignal {
    /// A signal fed by `releases`; `registration` is dropped with the signal
    /// (for example to unsubscribe).
    pub fn new(releases: watch::Receiver<u64>, registration: impl Send + Sync + 'static) -> Self {
        ReleaseSignal {
            releases,
            _registration: Box::new(registration),
        }
    }

    /// Waits for the next release. Returns `false` if the source is gone
    /// (the subscription connection closed); the caller then falls back on
    /// the lease's remaining time.
    ///
    /// # Cancel safety
    /// Cancel safe: a release seen by a cancelled call is reported by the
    /// next one.
    pub async fn released(&mut self) -> bool {
        self.releases.changed().await.is_ok()
    }
}

/// A store that holds leases, as the Locker holds it (object-safe: each call
/// returns a [`StoreFuture`]). Every [`Store`] with [`Operators`] is one;
/// [`MemoryBackend`] implements it directly, answering in place.
///
/// Every method must be atomic in the store and must check the owner value,
/// so that a delayed request of an old acquisition never touches a newer one.
pub trait Backend: Send + Sync + 'static {
    /// Whether this store keeps `kind` (only what [`supports`](Self::supports)
    /// allows is ever asked of the methods below). Every store keeps
    /// [`LockKind::Exclusive`].
    fn supports(&self, kind: LockKind) -> bool {
        kind == LockKind::Exclusive
    }

    /// Takes a lease of `kind` for `owner` for `ttl` if the key admits it,
    /// minting a token greater than every token minted before for the key.
    /// Idempotent per owner value: if `owner` already holds it (an earlier
    /// send of the same request), answers its grant and extends it to `ttl`
    /// from now; if `owner` has a queue entry, refreshes it.
    fn try_acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>>;

    /// Extends `owner`'s lease of `kind` to `ttl` from now if it still
    /// holds it. Returns `false` when the lease is gone or has another
    /// owner.
    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Ends `owner`'s lease (or withdraws its queue entry) of `kind` and tells
    /// the waiters. Returns `false` when `owner` held neither (nothing is
    /// changed then).
    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>>;

    /// Subscribes to the releases a waiter for a lease of `kind` must
    /// hear of: those of the lock; or, for a waiter with a queue entry (`queued_owner`
    /// is its owner value: the store answered [`Attempt::Queued`]), only
    /// when it may go, where the store can tell it (as an etcd key or a
    /// ZooKeeper node watches its predecessor). The subscription is active
    /// when the returned future resolves.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>>;

    /// Wakes the subscribers of the lock of `kind` on `keys` although
    /// nothing may have been released: an election's new leader, or one
    /// that resigned, tells those who observe it
    /// ([`Locker::observe`](crate::Locker::observe)). A store whose
    /// subscription hears every change of holder itself (etcd's watch,
    /// ZooKeeper's on the children and the first one's grant) does
    /// nothing, as by default.
    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        let _ = (keys, kind);
        StoreFuture::ready(Ok(()))
    }

    /// Waits until `wanted` replicas have `owner`'s lease of `kind` on
    /// `keys` (of `ttl`, just granted), for at most `within`, and returns
    /// how many do (0 if the lease is gone). Stores without replicas
    /// return `wanted`.
    fn confirm_replicas<'a>(
        &'a self,
        _keys: &'a StoredKeys,
        _kind: LockKind,
        _owner: &'a str,
        _ttl: Duration,
        wanted: usize,
        _within: Duration,
    ) -> StoreFuture<'a, Result<usize, StoreError>> {
        StoreFuture::ready(Ok(wanted))
    }

    /// What the store holds for `keys`: every holder of every kind of
    /// lock on the key, and the waiters' queue entries where it keeps them
    /// ([`Locker::inspect`](crate::Locker::inspect)). By default the store
    /// cannot be inspected.
    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        let _ = keys;
        cannot(self, "be inspected")
    }

    /// The user keys of namespace `namespace` that match `pattern` and
    /// have a holder or a queue entry
    /// ([`Locker::held_keys`](crate::Locker::held_keys)), at most
    /// [`MAX_LISTED`](crate::MAX_LISTED) of them or a few more.
    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        let _ = (namespace, pattern);
        cannot(self, "list its locks")
    }

    /// Removes every holder and queue entry of every kind of lock on `keys`
    /// at once, keeping what orders its tokens, and wakes its waiters;
    /// returns what it removed ([`Locker::force_release`](crate::Locker::force_release)).
    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        let _ = keys;
        cannot(self, "force-release a lock")
    }

    /// Whether every [`StoreFuture`] this backend returns is already
    /// answered (a store in this process). A guard dropped on such a store
    /// then releases in place instead of on a spawned task.
    fn answers_in_place(&self) -> bool {
        false
    }

    /// A short description for logs (`redis 127.0.0.1:6379`, `memory`).
    fn describe(&self) -> String;
}

/// The refusal of an operator's call by a store without it: `<store> cannot
/// <what>`.
fn cannot<'a, T>(
    store: &(impl Backend + ?Sized),
    what: &str,
) -> StoreFuture<'a, Result<T, StoreError>> {
    StoreFuture::ready(Err(refusal(&store.describe(), what)))
}

/// `<store> cannot <what>`, a permanent error.
fn refusal(store: &str, what: &str) -> StoreError {
    StoreError::permanent(format!("{store} cannot {what}"))
}
