//! Distributed locks for async Rust: leases with watchdog renewal, fencing
//! tokens and a lease-loss signal, on Redis (feature `redis`, on by
//! default), etcd (feature `etcd`), ZooKeeper (feature `zookeeper`),
//! PostgreSQL (feature `postgres`) or an embedded in-process backend with the
//! same semantics.
//!
//! ```
//! use lock_core::Locker;
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), lock_core::LockError> {
//! // Locker::connect("redis://127.0.0.1:6379").await? (or "etcd://...",
//! // "zk://...", "postgres://...") for a fleet; Locker::from_env().await? reads LOCK_URL or REDIS_URL.
//! let locker = Locker::memory();
//!
//! let guard = locker.lock("order:42").ttl(Duration::from_secs(30)).wait(Duration::from_secs(5)).await?;
//! // Pass the token to every write the lock protects; the store rejects
//! // writes whose token is older than the newest it has seen.
//! let token = guard.token();
//! # let _ = token;
//! guard.release().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # The attribute
//!
//! With the `macros` feature (on by default), [`macro@distributed_lock`]
//! wraps an async function in a lock whose key comes from its arguments:
//!
//! ```
//! use lock_core::{distributed_lock, FencingToken, LockError, Locker};
//!
//! #[derive(Debug)]
//! enum AppError {
//!     Lock(LockError),
//! }
//!
//! impl From<LockError> for AppError {
//!     fn from(error: LockError) -> Self {
//!         AppError::Lock(error)
//!     }
//! }
//!
//! #[distributed_lock(key = "order:<id>", ttl = "30s", wait = "5s")]
//! async fn pay(id: u64, cents: u64) -> Result<FencingToken, AppError> {
//!     // Pass the token along with the write; the store rejects older ones.
//!     Ok(FencingToken::current().expect("inside the lock"))
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), AppError> {
//! lock_core::install(Locker::memory())?; // once, at start-up
//! let first = pay(42, 100).await?;
//! let second = pay(42, 100).await?;
//! assert!(second > first);
//! # Ok(())
//! # }
//! ```
//!
//! # What a lock gives, and what it does not
//! - **Mutual exclusion while the lease is valid**: at most one owner holds
//!   a key's lease at a time in the store. A lease is a lock with a time
//!   limit; the watchdog renews it every ttl/3 while the guard lives.
//! - **Loss is told**: when a renewal is not confirmed before the local
//!   deadline (last confirmed request's send time + ttl - drift), or the
//!   store names another owner, [`LockGuard::lost`] resolves and
//!   [`LockGuard::is_held`] turns false.
//! - **Fencing tokens** strictly increase per key (also across restarts
//!   without persistence and replica promotion: the token is
//!   `max(last + 1, server clock in µs)`). A holder that paused past its
//!   lease cannot be stopped by the lock itself - only the store it writes
//!   to can, by rejecting older tokens. Correctness needs fencing; the lease
//!   alone gives efficiency (Kleppmann, "How to do distributed locking").
//!
//! # Words
//! - **Lease**: the right to a lock for a time (the ttl), renewed while held.
//! - **Holder**: the owner of a live lease. Its **owner value** (the
//!   Locker's label, the process, a random part per process and a number
//!   per acquisition) is what the store checks before it renews or
//!   releases.
//! - **Token**: a number that strictly rises with each grant of a key,
//!   handed to every write the lock protects so that a late writer is
//!   refused ([`FencingToken`]).
//! - **Kind**: plain, fair, read, write, semaphore permit or striped segment
//!   ([`LockKind`]); each kind on a key is a lock of its own.
//! - **Waiter**: a request waiting for a held lock. Waiters of one process
//!   form a **local queue** per key, and only the one at its front talks to
//!   the store. Where the store queues waiters (a fair request, a waiting
//!   writer; every waiter on etcd and ZooKeeper), a waiter also keeps a
//!   **queue entry** in the store, which holds its place fleet-wide.
//!
//! # Parts
//! - [`Locker`]: a backend plus defaults; [`LockRequest`]: one acquisition;
//!   [`LockGuard`]: a held lease; [`FencingToken`]; [`LockError`].
//! - [`backend`]: the store boundary ([`LockStore`](backend::LockStore)) and the
//!   stores: `RedisBackend` (one server, TLS, the master that Sentinel
//!   names, followed through failovers, or a Cluster), `RedLockBackend` (a
//!   majority of independent masters), `EtcdBackend`, `ZooKeeperBackend`,
//!   `PostgresBackend` (also through PgBouncer), each behind its feature, and
//!   [`MemoryBackend`](backend::MemoryBackend).
//! - Waiting: one pub/sub subscription per key per process, waiters of one
//!   process queue locally FIFO and only the front contends at the store;
//!   fair requests each take their own queue entry in the store at once.
//! - Reentrancy is task-scoped: see [`LockGuard::scope`].
//! - Operators: [`Locker::inspect`] (who holds a key, with which token,
//!   since when, how many wait), [`Locker::held_keys`] and
//!   [`Locker::force_release`]; owner values carry the Locker's
//!   [`label`](LockerBuilder::label).
//! - Observability: `tracing` events for acquire, renew, lost and release
//!   with the key and token as fields; with feature `metrics`, counters and a
//!   wait-time histogram through the `metrics` facade.

#![deny(missing_debug_implementations)]

// The house, floor by floor: each module imports only from its own floor
// and those below it (CONTRIBUTING.md, "Where a change belongs").
// 1 vocabulary: tokens, kinds, errors (LockError and the StoreError it
//   carries), owner values, holder records, deadlines.
// 2 stores: the store boundary (`backend`: the LockStore trait, stored names, attempts,
//   per-key shards) and one folder per store.
// 3 core: the Locker, its builder and connect, acquisition, leases and the
//   watchdog, the process-local queues, the task scope.
// 4 kinds and operators: requests per kind, multi-locks, elections,
//   operators' calls, fenced writes, the macro's and axum's glue.

// 1 vocabulary
mod deadline;
mod error;
mod inspect;
mod kind;
mod outcome;
mod owner;
mod telemetry;
mod token;
mod waiters;

// 2 stores
pub mod backend;

// 3 core
mod acquire;
mod builder;
mod connect;
mod default_locker;
mod fair_waiters;
mod guard;
mod lease;
mod local_queue;
mod locker;
mod options;
mod scope;

// 4 kinds and operators
#[cfg(feature = "axum")]
pub mod axum;
mod election;
pub mod fence;
mod macro_support;
mod multi;
mod operators;
mod request;

/// What the expansion of `#[distributed_lock]` calls: not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::macro_support::*;
}

pub use backend::stored_keys::MAX_KEY_LEN;
pub use builder::LockerBuilder;
pub use default_locker::{install, installed};
pub use election::{Campaign, Election, Leader, LeaderChanges, Leadership};
pub use error::StoreError;
pub use error::{LockError, LossReason, Operation};
pub use guard::{LockGuard, OnLost};
pub use inspect::{ForceReleased, Holder, Inspection, MAX_LISTED};
pub use kind::LockKind;
pub use lease::Lease;
#[cfg(feature = "macros")]
pub use lock_macros::distributed_lock;
pub use locker::{
    DEFAULT_MAX_WAITERS_PER_KEY, DEFAULT_NAMESPACE, DEFAULT_TIMEOUT, DEFAULT_TTL, DEFAULT_WAIT,
    Locker, MIN_TTL,
};
pub use multi::{LockAllFuture, LockAllRequest, MultiGuard};
pub use options::LockOptions;
pub use outcome::Outcome;
pub use owner::MAX_VALUE_LEN;
pub use request::LockFuture;
pub use request::{LockRequest, MAX_PERMITS_OR_SEGMENTS};
pub use scope::Scoped;
pub use token::FencingToken;
pub use waiters::{MAX_LISTED_WAITERS, Unlisted, Waiter, Waiters};
