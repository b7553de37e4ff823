//! The one error type of the crate, [`LockError`], and the store-level
//! [`StoreError`] it wraps.

use std::fmt;
use std::time::Duration;

use crate::kind::LockKind;
use crate::token::FencingToken;

mod store;

pub use self::store::{Applied, Refusal, StoreError};

/// Longest stretch of a user key shown in an error message; longer keys are
/// cut so that a 1 MiB key does not end up in a log line.
const KEY_IN_MESSAGE: usize = 80;

/// Everything that can go wrong when taking, keeping or releasing a lock.
///
/// Each message names the key and says what to do next. The enum is
/// `#[non_exhaustive]`: match the variants you handle and keep a `_` arm.
///
/// ```
/// use lock_core::{LockError, Locker};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let locker = Locker::memory();
/// let _held = locker.lock("order:42").await.unwrap();
/// match locker.lock("order:42").wait(Duration::from_millis(10)).await {
///     Err(LockError::WaitTimeout { key, .. }) => assert_eq!(key, "order:42"),
///     other => panic!("expected a timeout, got {other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another owner held the lock for the whole wait. Retry later (a
    /// layer answers `423` with `Retry-After` from `holder_expires_in`), or
    /// allow a longer `.wait(..)`.
    #[error("lock `{key}` is still held by another owner after waiting {waited:?}")]
    WaitTimeout {
        /// The user key.
        key: String,
        /// How long the request waited.
        waited: Duration,
        /// The holder's remaining lease when last seen (`None`: not seen,
        /// e.g. another task of this process held it); a hint for
        /// `Retry-After`.
        holder_expires_in: Option<Duration>,
    },

    /// The lease ended while its holder still believed it held the lock.
    /// Stop the critical section and acquire again: writes fenced with the
    /// token are rejected once a newer token has been seen.
    #[error("lease on lock `{key}` (token {token}) lost: {reason}")]
    Lost {
        /// The user key.
        key: String,
        /// The token of the lost lease.
        token: FencingToken,
        /// Why the lease counts as lost.
        reason: LossReason,
    },

    /// The store could not be reached or did not answer in time, also after
    /// the retries a broken connection gets. `source` says why, and whether
    /// the request may have been applied ([`StoreError::outcome_unknown`]).
    /// Check that the server is up and reachable, and retry.
    #[error("lock store unavailable while {}", doing(.op, .key))]
    Unavailable {
        /// The user key (`*` for [`Operation::Connect`]).
        key: String,
        /// What the lock was doing.
        op: Operation,
        /// The store's error.
        #[source]
        source: StoreError,
    },

    /// The store URL does not parse. Not retried: fix the URL.
    #[error(
        "invalid lock store URL; write it as redis://[user[:password]@]host[:port][/db], \
         redis+unix:///path, etcd://[user:password@]host:port[,...], \
         zk://host:port[,...][/chroot] or postgres://[user[:password]@]host[:port]/database"
    )]
    InvalidUrl {
        /// What the URL parser said.
        #[source]
        source: StoreError,
    },

    /// The store URL names a scheme this build cannot connect with (such as
    /// `rediss://` when lock-core is built without its `tls` feature: turn
    /// it on). Not retried.
    #[error(
        "lock store URL scheme `{scheme}` is not supported; use redis://, redis+unix://, \
         etcd://, zk:// or postgres:// (rediss:// needs lock-core's `tls` feature, etcd://, \
         zk:// and postgres:// theirs)"
    )]
    UnsupportedScheme {
        /// The scheme of the URL, such as `rediss`.
        scheme: String,
        /// What the client library said.
        #[source]
        source: StoreError,
    },

    /// The store rejected the user name or password (Redis `WRONGPASS`).
    /// Not retried: fix the credentials.
    #[error("lock store rejected the user name or password in the store URL")]
    AuthenticationFailed {
        /// The store's error.
        #[source]
        source: StoreError,
    },

    /// The TLS handshake with the store failed: its certificate does not
    /// chain to a trusted root (give your authority's certificate to
    /// `LockerBuilder::tls_root_certificates`), names another host, or has
    /// expired. Not retried.
    #[error(
        "TLS handshake with the lock store failed; check its certificate and the trusted roots"
    )]
    TlsRejected {
        /// The TLS library's error.
        #[source]
        source: StoreError,
    },

    /// The store requires a password and none was given (Redis `NOAUTH`).
    /// Not retried: put the password in the URL.
    #[error("lock store requires a password; add it to the store URL (redis://:password@host)")]
    PasswordRequired {
        /// The store's error.
        #[source]
        source: StoreError,
    },

    /// The store's access rules deny a command, key or channel the lock
    /// needs (Redis `NOPERM`). Not retried.
    ///
    /// A Redis ACL user of a Locker with namespace `lock` needs:
    /// `ACL SETUSER <user> ~lock:* &lock:* +evalsha +script|load +get +mget
    /// +set +del +append +pttl +pexpire +time +publish +subscribe
    /// +unsubscribe +hget +hset +hdel +hgetall +hlen` (and `+wait` with
    /// [`LockerBuilder::replicas`](crate::LockerBuilder::replicas)); on a
    /// Redis Cluster also `+spublish +ssubscribe +sunsubscribe
    /// +cluster|slots`. Fenced writes (`RedisFence`) need the data's keys
    /// and their token records (`{<key>}:fence`) too.
    #[error(
        "lock store's access rules deny a command, key or channel that lock `{key}` needs; \
         grant those listed in the docs of LockError::PermissionDenied"
    )]
    PermissionDenied {
        /// The user key (`*` when found while connecting).
        key: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },

    /// The user key cannot be used as a lock key.
    #[error("invalid lock key `{key}`: {reason}")]
    InvalidKey {
        /// The offending key (cut to a readable length).
        key: String,
        /// What is wrong with it and how to fix it.
        reason: String,
    },

    /// A fenced write carried a token older than one already seen: the
    /// writer's lease was lost. Acquire the lock again and redo the work.
    #[error("stale fencing token {token} for `{resource}`: token {newest} has written there")]
    StaleToken {
        /// The resource the write was for.
        resource: String,
        /// The token the write carried.
        token: FencingToken,
        /// The newest token seen for the resource.
        newest: FencingToken,
    },

    /// Too few replicas acknowledged the acquisition, so it was released (a
    /// failover could have forgotten it). Retry, or lower the requirement.
    #[error("lock `{key}` released: only {confirmed} of {wanted} replicas confirmed it in time")]
    ReplicasNotConfirmed {
        /// The user key.
        key: String,
        /// Replicas required.
        wanted: usize,
        /// Replicas that confirmed.
        confirmed: usize,
    },

    /// Too many tasks of this process already wait for the key. Shed load,
    /// or raise `LockerBuilder::max_waiters_per_key`.
    #[error("{limit} tasks of this process already wait for lock `{key}`")]
    TooManyWaiters {
        /// The user key.
        key: String,
        /// The configured bound.
        limit: usize,
    },

    /// A `#[distributed_lock]` without `locker = ...` ran before a Locker
    /// was installed.
    #[error(
        "no Locker installed for lock `{key}`: call `lock_core::install(locker)` at start-up, \
         or give the attribute `locker = <expr>`"
    )]
    NotInstalled {
        /// The user key the function wanted.
        key: String,
    },

    /// The store cannot keep this kind of lock (a kind it does not
    /// support). Nothing was sent. Use a store that keeps it, or another
    /// kind of lock.
    #[error("{store} does not support {kind} locks (lock `{key}`)")]
    Unsupported {
        /// The user key.
        key: String,
        /// The kind of lock asked for.
        kind: LockKind,
        /// The store ([`LockStore::describe`](crate::backend::LockStore::describe)).
        store: String,
    },

    /// The store holds this lock in a format another version of lock-core
    /// wrote, which this one cannot read. The value is left alone, never
    /// taken as free or as lost. Every instance of an application that
    /// shares a store must agree on the format: finish rolling out one
    /// lock-core version (see "Versions of one fleet" in docs/guarantees.md).
    #[error("lock `{key}` is stored in format {stored}; this lock-core reads format {ours}")]
    UnknownFormat {
        /// The user key.
        key: String,
        /// The stored value's format version (`0`: from before versions).
        stored: u32,
        /// The format this lock-core reads and writes.
        ours: u32,
    },

    /// The current holders of a semaphore (or striped lock) were granted
    /// with another number of permits (or segments) than this request
    /// names. Every process must use one number per key; the stored one
    /// changes once nothing is held.
    #[error("lock `{key}` is held with {stored} {what}; this request names {asked}")]
    SizeDisagrees {
        /// The user key.
        key: String,
        /// `"permits"` or `"segments"`.
        what: &'static str,
        /// The number this request named.
        asked: u32,
        /// The number the key's holders were granted with.
        stored: u32,
    },

    /// A write lock was asked for inside a scope holding the read lock of
    /// the same key: the write would wait for this very reader to leave.
    /// Refused at once instead of hanging. Release the read lock first, or
    /// take the write lock from the start.
    #[error(
        "write lock on `{key}` asked for inside its own read lock, which it would wait for \
         forever; take the write lock from the start"
    )]
    UpgradeWouldDeadlock {
        /// The user key.
        key: String,
    },

    /// A configuration value is unusable.
    #[error("invalid lock configuration: {what}: {reason}")]
    InvalidConfig {
        /// The setting.
        what: &'static str,
        /// What is wrong and what to do.
        reason: String,
    },
}

impl LockError {
    /// Shortens a user key for a message; callers keep the full key themselves.
    pub(crate) fn shown(key: &str) -> String {
        if key.len() <= KEY_IN_MESSAGE {
            return key.to_owned();
        }
        let mut end = KEY_IN_MESSAGE;
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &key[..end], key.len())
    }

    /// The error for `source`, met while doing `op` on the lock `key`: a
    /// refusal has its own variant, anything else is [`LockError::Unavailable`].
    pub(crate) fn from_store(key: &str, op: Operation, source: StoreError) -> Self {
        match source.refusal().cloned() {
            Some(Refusal::InvalidUrl) => LockError::InvalidUrl { source },
            Some(Refusal::UnsupportedScheme(scheme)) => {
                LockError::UnsupportedScheme { scheme, source }
            }
            Some(Refusal::AuthenticationFailed) => LockError::AuthenticationFailed { source },
            Some(Refusal::TlsRejected) => LockError::TlsRejected { source },
            Some(Refusal::PasswordRequired) => LockError::PasswordRequired { source },
            Some(Refusal::PermissionDenied) => LockError::PermissionDenied {
                key: Self::shown(key),
                source,
            },
            Some(Refusal::SizeDisagrees {
                what,
                asked,
                stored,
            }) => LockError::SizeDisagrees {
                key: Self::shown(key),
                what,
                asked,
                stored,
            },
            Some(Refusal::UnknownFormat { stored, ours }) => LockError::UnknownFormat {
                key: Self::shown(key),
                stored,
                ours,
            },
            None => LockError::Unavailable {
                key: Self::shown(key),
                op,
                source,
            },
        }
    }

    pub(crate) fn invalid_config(what: &'static str, reason: impl Into<String>) -> Self {
        LockError::InvalidConfig {
            what,
            reason: reason.into(),
        }
    }
}

/// What lock `key` was doing: `acquiring lock `order:42``, or `connecting`.
fn doing(op: &Operation, key: &str) -> String {
    match op {
        Operation::Connect => op.to_string(),
        op => format!("{op} lock `{key}`"),
    }
}

/// What the lock was doing when the store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Connecting to the store (`Locker::redis`); no lock yet.
    Connect,
    /// Taking the lock.
    Acquire,
    /// Extending the lease.
    Renew,
    /// Giving the lock back.
    Release,
    /// Subscribing to release notifications.
    Subscribe,
    /// Waiting for replicas to acknowledge.
    ConfirmReplicas,
    /// A fenced write.
    FencedWrite,
    /// Reading what the store holds (`Locker::inspect`, `Locker::held_keys`).
    Inspect,
    /// Removing every holder (`Locker::force_release`).
    ForceRelease,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Connect => "connecting",
            Operation::Acquire => "acquiring",
            Operation::Renew => "renewing",
            Operation::Release => "releasing",
            Operation::Subscribe => "subscribing to releases of",
            Operation::ConfirmReplicas => "confirming replicas for",
            Operation::Inspect => "inspecting",
            Operation::ForceRelease => "force-releasing",
            Operation::FencedWrite => "writing under",
        })
    }
}

#[cfg(test)]
mod tests;

/// Why a lease counts as lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// No renewal was confirmed before the local deadline (store down or
    /// slow, or this process paused).
    NotRenewedInTime,
    /// The store answered that the lock is gone or has another owner.
    OwnerChanged,
    /// The maximum hold time was reached, so renewals stopped.
    MaxHoldTimeReached,
}

impl fmt::Display for LossReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LossReason::NotRenewedInTime => "no renewal was confirmed before the lease ran out",
            LossReason::OwnerChanged => "the store no longer has this owner on the lock",
            LossReason::MaxHoldTimeReached => "the maximum hold time was reached",
        })
    }
}
