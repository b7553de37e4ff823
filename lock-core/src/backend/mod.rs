//! The store boundary: the [`Backend`] trait and its implementations.
//!
//! A backend does four things with one lock, each atomically in its store:
//! try to take the lease (minting a fencing token), renew it, release it,
//! and tell waiters about releases. Everything above it - the guard, the
//! watchdog, waiting, local queueing, reentrancy - is store-agnostic.
//!
//! How other stores map onto it:
//! - **Redis Cluster**: the three stored keys share one hash slot (see
//!   [`StoredKeys`]), so the same scripts run on a cluster connection;
//!   releases go out on the key's channel.
//! - **Sentinel**: a connection to the current master is a plain
//!   [`RedisBackend`] connection; replica acknowledgement covers failover.
//! - **RedLock**: a backend over N [`RedisBackend`]s that reports
//!   [`Attempt::Acquired`] when a quorum did within the validity time, with
//!   the highest token of the quorum; renew and release go to all.
//! - **etcd**: a lease with the ttl plus a key created under it; the key's
//!   create revision is the fencing token; a watch on the predecessor is the
//!   release signal.
//! - **ZooKeeper**: an ephemeral sequential node; its sequence number (or
//!   the czxid) is the token; a watch on the predecessor is the signal.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::StoreError;
use crate::keys::StoredKeys;
use crate::token::FencingToken;

pub mod memory;
pub mod redis;

pub use self::memory::MemoryBackend;
pub use self::redis::RedisBackend;

/// A boxed, sendable future, as the object-safe [`Backend`] returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The outcome of one attempt to take a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The lease is ours, with a freshly minted token. Also returned when
    /// the lease is already held by the same owner value (a retried request).
    Acquired(FencingToken),
    /// Another owner holds the lease, which the store expects to end within
    /// `remaining` (`None`: unknown).
    Held {
        /// Time left on the holder's lease.
        remaining: Option<Duration>,
    },
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

/// A store that holds leases. Implemented by [`RedisBackend`] and
/// [`MemoryBackend`]; see the module docs for how other stores map onto it.
///
/// Every method must be atomic in the store and must check the owner value,
/// so that a delayed request of an old acquisition never touches a newer one.
pub trait Backend: Send + Sync + 'static {
    /// Takes the lease for `owner` for `ttl` if it is free, minting a token
    /// greater than every token minted before for the key.
    fn try_acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<Attempt, StoreError>>;

    /// Extends the lease to `ttl` from now if `owner` still holds it.
    /// Returns `false` when the lease is gone or has another owner.
    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Ends the lease if `owner` holds it and tells the waiters. Returns
    /// `false` when `owner` did not hold it (nothing is changed then).
    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;

    /// Subscribes to the releases of the lock. The subscription is active
    /// when the returned future resolves.
    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> BoxFuture<'a, Result<ReleaseSignal, StoreError>>;

    /// Waits until `wanted` replicas have every write made so far, for at
    /// most `timeout`, and returns how many did. Stores without replicas
    /// return `wanted`.
    fn confirm_replicas(
        &self,
        wanted: usize,
        _timeout: Duration,
    ) -> BoxFuture<'_, Result<usize, StoreError>> {
        Box::pin(async move { Ok(wanted) })
    }

    /// A short description for logs (`redis 127.0.0.1:6379`, `memory`).
    fn describe(&self) -> String;
}
