//! The one error type of the crate, [`LockError`], and the store-level
//! [`StoreError`] it wraps.

use std::fmt;
use std::time::Duration;

use crate::token::FencingToken;

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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another owner held the lock for the whole wait.
    #[error(
        "lock `{key}` is held by another owner and was not released within {waited:?}; \
         retry later or allow a longer `.wait(..)`"
    )]
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
    #[error(
        "the lease on lock `{key}` (token {token}) was lost: {reason}; stop the critical \
         section and acquire again (writes fenced with token {token} are rejected once a \
         newer token is seen)"
    )]
    Lost {
        /// The user key.
        key: String,
        /// The token of the lost lease.
        token: FencingToken,
        /// Why the lease counts as lost.
        reason: LossReason,
    },

    /// The store could not be reached or did not answer in time.
    #[error(
        "lock store unavailable while {op} lock `{key}`: {source}; check that the server is \
         up and reachable (REDIS_URL) and retry"
    )]
    Unavailable {
        /// The user key.
        key: String,
        /// What the lock was doing.
        op: Operation,
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

    /// A fenced write carried a token older than one already seen.
    #[error(
        "stale fencing token {token} for `{resource}`: token {newest} has already written \
         there, so this holder's lease was lost; re-acquire the lock and redo the work"
    )]
    StaleToken {
        /// The resource the write was for.
        resource: String,
        /// The token the write carried.
        token: FencingToken,
        /// The newest token seen for the resource.
        newest: FencingToken,
    },

    /// Too few replicas acknowledged the acquisition; the lock was released.
    #[error(
        "lock `{key}` was taken but only {confirmed} of {wanted} replicas confirmed it in time, \
         so it was released (a failover could have forgotten it); retry, or lower the \
         replica requirement"
    )]
    ReplicasNotConfirmed {
        /// The user key.
        key: String,
        /// Replicas required.
        wanted: usize,
        /// Replicas that confirmed.
        confirmed: usize,
    },

    /// Too many tasks of this process already wait for the key.
    #[error(
        "{limit} tasks of this process already wait for lock `{key}`; shed load or raise \
         `LockerBuilder::max_waiters_per_key`"
    )]
    TooManyWaiters {
        /// The user key.
        key: String,
        /// The configured bound.
        limit: usize,
    },

    /// A `#[distributed_lock]` without `locker = ...` ran before a Locker
    /// was installed.
    #[error(
        "no Locker is installed for the locked function (lock `{key}`): call \
         `lock_core::install(locker)` at start-up, or give the attribute `locker = <expr>`"
    )]
    NotInstalled {
        /// The user key the function wanted.
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

    pub(crate) fn unavailable(key: &str, op: Operation, source: StoreError) -> Self {
        LockError::Unavailable {
            key: Self::shown(key),
            op,
            source,
        }
    }

    pub(crate) fn invalid_config(what: &'static str, reason: impl Into<String>) -> Self {
        LockError::InvalidConfig {
            what,
            reason: reason.into(),
        }
    }
}

/// What the lock was doing when the store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
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
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Acquire => "acquiring",
            Operation::Renew => "renewing",
            Operation::Release => "releasing",
            Operation::Subscribe => "subscribing to releases of",
            Operation::ConfirmReplicas => "confirming replicas for",
            Operation::FencedWrite => "writing under",
        })
    }
}

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

/// A failure of the store itself (connection, timeout, protocol).
///
/// `outcome_unknown()` tells whether the request may have been applied: a
/// timed-out acquire may have taken the lock, which is then released by its
/// owner value in the background.
#[derive(Debug)]
pub struct StoreError {
    outcome_unknown: bool,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl StoreError {
    /// A store error from any error; `outcome_unknown` says whether the
    /// request may have reached the store and been applied.
    pub fn new(
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
        outcome_unknown: bool,
    ) -> Self {
        StoreError {
            outcome_unknown,
            source: source.into(),
        }
    }

    /// The request timed out after `after`: it may have been applied.
    pub fn timed_out(after: Duration) -> Self {
        StoreError::new(format!("no answer within {after:?}"), true)
    }

    /// Whether the request may have been applied.
    pub fn outcome_unknown(&self) -> bool {
        self.outcome_unknown
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)?;
        if self.outcome_unknown {
            f.write_str(" (the request may have been applied)")?;
        }
        Ok(())
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        // A dropped connection or a timeout leaves the fate of a sent
        // command open; a refused connection or a server error does not.
        let unknown =
            (err.is_timeout() || err.is_connection_dropped()) && !err.is_connection_refusal();
        StoreError::new(err, unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_cut_in_messages() {
        let key = "é".repeat(100);
        let shown = LockError::shown(&key);
        assert!(shown.len() < 100, "{shown}");
        assert!(shown.ends_with("(200 bytes)"));
    }

    #[test]
    fn messages_name_the_key_and_the_remedy() {
        let err = LockError::WaitTimeout {
            key: "order:42".into(),
            waited: Duration::from_secs(5),
            holder_expires_in: None,
        };
        let msg = err.to_string();
        assert!(
            msg.contains("`order:42`") && msg.contains(".wait("),
            "{msg}"
        );
    }
}
