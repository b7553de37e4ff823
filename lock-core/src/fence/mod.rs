//! Fenced writes: the store rejects a write whose fencing token is older
//! than the newest it has seen for the resource.
//!
//! A lease cannot stop a holder that paused past it (GC pause, VM stall,
//! network delay) from writing when it resumes; the store it writes to
//! can, if every write carries the lock's [`FencingToken`] and the store
//! keeps the newest token per resource (Kleppmann, "How to do distributed
//! locking"; Chubby's sequencers). Equal tokens pass: one holder may write
//! several times.
//!
//! - Redis: [`RedisFence`] - fenced `SET`, `HSET` and any one command, each
//!   one round trip (a Lua script that checks, records and writes).
//! - PostgreSQL (feature `postgres`): `postgres::PgFence`, the pattern
//!   `UPDATE ... SET ..., fence_token = $token WHERE id = $id AND
//!   fence_token <= $token`; MySQL (feature `mysql`): `mysql::MySqlFence`,
//!   the same pattern.
//! - A lock in the same SQL database (the PostgreSQL and MySQL stores):
//!   `LockGuard::check_in` makes a transaction's writes commit only while
//!   the lease holds, with no token column.
//! - HTTP: lock-tower's `FenceCheckLayer` answers `409 Conflict` to a
//!   request whose `fencing-token` header is older than the newest seen.

#[cfg(any(feature = "postgres", feature = "mysql"))]
mod check_in;
#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod sql_table;

#[cfg(any(feature = "postgres", feature = "mysql"))]
pub use self::check_in::SqlTransaction;
#[cfg(feature = "redis")]
pub use self::redis::{RedisFence, record_key};

use crate::error::LockError;
use crate::token::FencingToken;

/// The error for a write with `token` on `resource` where `newest` was seen.
#[cfg_attr(
    not(any(feature = "redis", feature = "postgres", feature = "mysql")),
    allow(dead_code)
)]
pub(crate) fn stale(resource: &str, token: FencingToken, newest: FencingToken) -> LockError {
    crate::telemetry::fence_refused();
    LockError::StaleToken {
        resource: LockError::shown(resource),
        token,
        newest,
    }
}
