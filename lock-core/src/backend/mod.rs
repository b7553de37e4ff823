//! The store boundary: the [`LockStore`] trait the Locker holds, its
//! vocabulary, and the stores.
//!
//! A store does four things with one lock, each atomically in its store:
//! try to take a lease for a [`LockKind`](crate::LockKind) (minting a fencing
//! token), renew it, release it, and tell waiters about releases. It answers
//! an attempt with a [`Grant`] (token, the ttl it gave, the segment), with
//! "held", or with "queued": a queue entry now stands in the store for the
//! waiter, who refreshes it by asking again and withdraws it by releasing.
//! Everything above it - the guard, the watchdog, waiting, local queueing,
//! reentrancy - is store-agnostic. The stored names of a lock share one
//! Redis Cluster hash slot (see [`StoredKeys`]), so the Redis scripts also
//! run on a cluster connection (`RedisBackend::with_connection`).

mod attempt;
mod backoff;
#[cfg(feature = "etcd")]
mod etcd;
pub(crate) mod key_shards;
mod lock_store;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod lock_tables;
pub mod memory;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "etcd", feature = "zookeeper"))]
mod queued;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "redis")]
mod redlock;
mod release_signal;
mod store_future;
pub(crate) mod stored_keys;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod sweep;
#[cfg(feature = "zookeeper")]
mod zookeeper;

pub use self::attempt::{Attempt, Grant};
pub(crate) use self::backoff::{Backoff, release_until};
#[cfg(feature = "etcd")]
pub use self::etcd::EtcdBackend;
pub use self::lock_store::LockStore;
pub use self::memory::MemoryBackend;
#[cfg(feature = "mysql")]
pub use self::mysql::MysqlBackend;
#[cfg(feature = "postgres")]
pub use self::postgres::PostgresBackend;
#[cfg(feature = "redis")]
pub use self::redis::{RedisBackend, RedisConnection};
#[cfg(feature = "redis")]
pub use self::redlock::RedLockBackend;
pub use self::release_signal::ReleaseSignal;
pub use self::store_future::StoreFuture;
pub use self::stored_keys::StoredKeys;
#[cfg(feature = "zookeeper")]
pub use self::zookeeper::ZooKeeperBackend;
pub use crate::error::{Applied, Refusal, StoreError};
pub use crate::inspect::Pattern;
