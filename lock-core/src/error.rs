//! The one error type of the crate, [`LockError`], and the store-level
//! [`StoreError`] it wraps.

use std::fmt;
use std::sync::Arc;
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
    #[error("lock store unavailable while {op} lock `{key}`")]
    Unavailable {
        /// The user key.
        key: String,
        /// What the lock was doing.
        op: Operation,
        /// The store's error.
        #[source]
        source: StoreError,
    },

    /// The store URL does not parse. Not retried: fix the URL.
    #[error(
        "invalid lock store URL; write it as redis://[user[:password]@]host[:port][/db] or \
         redis+unix:///path"
    )]
    InvalidUrl {
        /// What the URL parser said.
        #[source]
        source: StoreError,
    },

    /// The store URL names a scheme this build cannot connect with (such as
    /// `rediss://`: lock-core is built without TLS; run a TLS tunnel such as
    /// stunnel to the server). Not retried.
    #[error("lock store URL scheme `{scheme}` is not supported; use redis:// or redis+unix://")]
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
    /// `ACL SETUSER <user> ~lock:* &lock:* +evalsha +eval +script|load +get
    /// +mget +set +del +append +pttl +pexpire +time +publish +subscribe
    /// +unsubscribe +ping` (and `+wait` with
    /// [`LockerBuilder::replicas`](crate::LockerBuilder::replicas)).
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
            Some(Refusal::PasswordRequired) => LockError::PasswordRequired { source },
            Some(Refusal::PermissionDenied) => LockError::PermissionDenied {
                key: Self::shown(key),
                source,
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

/// A failure of the store itself (connection, timeout, protocol), or its
/// refusal of this client (bad URL, credentials, access rules).
///
/// - [`outcome_unknown`](Self::outcome_unknown): whether the request may
///   have been applied. A request that times out may have been; an acquire
///   then releases by its owner value in the background.
/// - [`is_transient`](Self::is_transient): whether waiting may help. A
///   waiting acquire goes on through transient errors for up to the
///   Locker's timeout before it gives up.
/// - [`refusal`](Self::refusal): why the store turned this client away; no
///   retry helps, and [`LockError`] has a variant for each.
///
/// The Redis backend sends a request once more, on a fresh connection and
/// within the same timeout, when its connection broke before any reply
/// (refused, reset, closed): acquires are idempotent per owner value, and
/// releases and renewals are owner-checked, so a second send is safe. A
/// request that got no answer in time is not sent again (its outcome is
/// unknown), and neither is `WAIT` (on a fresh connection it would confirm
/// writes it never saw).
#[derive(Debug, Clone)]
pub struct StoreError {
    outcome_unknown: bool,
    kind: Kind,
    source: Arc<dyn std::error::Error + Send + Sync>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The store may answer if asked again (connection, timeout, failover).
    Transient,
    /// The store answered with an error that asking again does not change.
    Permanent,
    /// The store turned this client away.
    Refused(Refusal),
}

/// Why a store turned a client away: a setting to fix, not an outage to wait
/// out. Each has its own [`LockError`] variant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The URL does not parse.
    InvalidUrl,
    /// The URL's scheme (here) is one this build cannot connect with.
    UnsupportedScheme(String),
    /// Wrong user name or password.
    AuthenticationFailed,
    /// The store needs a password and none was given.
    PasswordRequired,
    /// The store's access rules deny a command, key or channel.
    PermissionDenied,
}

impl StoreError {
    /// A transient store error from any error; `outcome_unknown` says
    /// whether the request may have reached the store and been applied.
    pub fn new(
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
        outcome_unknown: bool,
    ) -> Self {
        StoreError {
            outcome_unknown,
            kind: Kind::Transient,
            source: Arc::from(source.into()),
        }
    }

    /// An error answer of the store that asking again would not change
    /// (the request was not applied).
    pub fn permanent(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        StoreError {
            kind: Kind::Permanent,
            ..StoreError::new(source, false)
        }
    }

    /// The store turned this client away (the request was not applied).
    pub fn refused(
        refusal: Refusal,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        StoreError {
            kind: Kind::Refused(refusal),
            ..StoreError::new(source, false)
        }
    }

    /// The request timed out after `after`: it may have been applied.
    pub fn timed_out(after: Duration) -> Self {
        StoreError::new(format!("no answer within {after:?}"), true)
    }

    /// The same error, with whether the request may have been applied set
    /// to `unknown` (by a caller that knows better than the error alone).
    pub(crate) fn unknown(mut self, unknown: bool) -> Self {
        self.outcome_unknown = unknown;
        self
    }

    /// Whether the request may have been applied.
    pub fn outcome_unknown(&self) -> bool {
        self.outcome_unknown
    }

    /// Whether asking again later may succeed: a connection that broke, a
    /// server that is down, restarting or slow. False for refusals and for
    /// error answers.
    pub fn is_transient(&self) -> bool {
        self.kind == Kind::Transient
    }

    /// Why the store turned this client away, if it did.
    pub fn refusal(&self) -> Option<&Refusal> {
        match &self.kind {
            Kind::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }
}

/// What happened to the request; why is its `source()`.
impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (&self.kind, self.outcome_unknown) {
            (Kind::Refused(_), _) => "the store refused this client",
            (_, true) => "store request failed; it may have been applied",
            (Kind::Permanent, false) => "the store answered with an error",
            (Kind::Transient, false) => "store request failed; it was not applied",
        })
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Error answers of Redis that a later try may not get: loading, a busy
/// script, a failover or resharding under way, too few replicas.
const TRANSIENT_ANSWERS: [&str; 7] = [
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "READONLY",
    "NOREPLICAS",
];

impl From<redis::RedisError> for StoreError {
    fn from(err: redis::RedisError) -> Self {
        use redis::{ErrorKind, RetryMethod};
        let refusal = match (err.kind(), err.code()) {
            (ErrorKind::AuthenticationFailed, _) | (_, Some("WRONGPASS")) => {
                Some(Refusal::AuthenticationFailed)
            }
            (_, Some("NOAUTH")) => Some(Refusal::PasswordRequired),
            (_, Some("NOPERM")) => Some(Refusal::PermissionDenied),
            // A command a script calls is denied with an `ERR` that quotes it.
            _ if err.detail().is_some_and(|d| d.contains("NOPERM")) => {
                Some(Refusal::PermissionDenied)
            }
            _ => None,
        };
        if let Some(refusal) = refusal {
            return StoreError::refused(refusal, err);
        }
        let transient = match err.code() {
            Some(code) => TRANSIENT_ANSWERS.contains(&code),
            // Not an answer: I/O, a garbled reply, or the client's own
            // error (a bad argument, an unsupported feature).
            None => !matches!(err.retry_method(), RetryMethod::NoRetry),
        };
        // A dropped connection, a timeout or a garbled reply leaves the
        // fate of a sent command open; a refused connection does not.
        let unknown =
            (err.is_timeout() || err.is_connection_dropped() || err.kind() == ErrorKind::Parse)
                && !err.is_connection_refusal();
        let error = StoreError::new(err, unknown);
        if transient {
            error
        } else {
            StoreError {
                kind: Kind::Permanent,
                ..error
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store error for the Redis error reply `line` (`-CODE detail`).
    fn answer(line: &str) -> StoreError {
        let reply = redis::parse_redis_value(format!("{line}\r\n").as_bytes()).unwrap();
        StoreError::from(reply.extract_error().unwrap_err())
    }

    #[test]
    fn redis_answers_are_sorted_into_transient_permanent_and_refused() {
        for line in [
            "-LOADING Redis is loading the dataset in memory",
            "-BUSY Redis is busy running a script",
            "-READONLY You can't write against a read only replica.",
            "-MASTERDOWN Link with MASTER is down",
            "-TRYAGAIN Multiple keys request during rehashing of slot",
            "-CLUSTERDOWN The cluster is down",
            "-NOREPLICAS Not enough good replicas to write.",
        ] {
            let err = answer(line);
            assert!(err.is_transient() && err.refusal().is_none(), "{line}");
        }
        for line in [
            "-ERR user_script:1: Script attempted to access nonexistent global variable 'x'",
            "-WRONGTYPE Operation against a key holding the wrong kind of value",
            "-OOM command not allowed when used memory > 'maxmemory'.",
        ] {
            let err = answer(line);
            assert!(!err.is_transient() && err.refusal().is_none(), "{line}");
            assert!(!err.outcome_unknown(), "{line}");
        }
        let refused = [
            (
                "-NOAUTH Authentication required.",
                Refusal::PasswordRequired,
            ),
            (
                "-WRONGPASS invalid username-password pair or user is disabled.",
                Refusal::AuthenticationFailed,
            ),
            (
                "-NOPERM User locks has no permissions to run the 'evalsha' command",
                Refusal::PermissionDenied,
            ),
            (
                "-ERR Error running script (call to f_1): @user_script:3: NOPERM No \
                 permissions to access a key",
                Refusal::PermissionDenied,
            ),
        ];
        for (line, refusal) in refused {
            let err = answer(line);
            assert_eq!(err.refusal(), Some(&refusal), "{line}");
            assert!(!err.is_transient(), "{line}");
        }
        let auth = redis::RedisError::from((redis::ErrorKind::AuthenticationFailed, "no"));
        assert_eq!(
            StoreError::from(auth).refusal(),
            Some(&Refusal::AuthenticationFailed)
        );
    }

    #[test]
    fn broken_connections_are_transient_and_in_doubt_unless_refused() {
        let io = |kind| StoreError::from(redis::RedisError::from(std::io::Error::from(kind)));
        let broken = io(std::io::ErrorKind::BrokenPipe);
        assert!(broken.is_transient() && broken.outcome_unknown());
        let refused = io(std::io::ErrorKind::ConnectionRefused);
        assert!(refused.is_transient() && !refused.outcome_unknown());
        let config = redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "bad"));
        assert!(!StoreError::from(config).is_transient());
    }

    #[test]
    fn long_keys_are_cut_in_messages() {
        let key = "é".repeat(100);
        let shown = LockError::shown(&key);
        assert!(shown.len() < 100, "{shown}");
        assert!(shown.ends_with("(200 bytes)"));
    }

    #[test]
    fn messages_name_the_key() {
        let err = LockError::WaitTimeout {
            key: "order:42".into(),
            waited: Duration::from_secs(5),
            holder_expires_in: None,
        };
        let msg = err.to_string();
        assert!(msg.contains("`order:42`") && msg.contains("5s"), "{msg}");
    }

    /// Each variant, its cause given as a store would.
    fn every_variant() -> Vec<LockError> {
        let key = || "order:42".to_owned();
        let refused = |refusal| StoreError::refused(refusal, "what the store said");
        let from_store = |err| LockError::from_store("order:42", Operation::Acquire, err);
        let token = FencingToken::new(7);
        vec![
            LockError::WaitTimeout {
                key: key(),
                waited: Duration::from_secs(5),
                holder_expires_in: None,
            },
            LockError::Lost {
                key: key(),
                token,
                reason: LossReason::OwnerChanged,
            },
            from_store(StoreError::new("broken pipe", true)),
            from_store(StoreError::new("connection refused", false)),
            from_store(StoreError::timed_out(Duration::from_secs(2))),
            from_store(StoreError::permanent("WRONGTYPE")),
            from_store(refused(Refusal::InvalidUrl)),
            from_store(refused(Refusal::UnsupportedScheme("rediss".into()))),
            from_store(refused(Refusal::AuthenticationFailed)),
            from_store(refused(Refusal::PasswordRequired)),
            from_store(refused(Refusal::PermissionDenied)),
            LockError::InvalidKey {
                key: key(),
                reason: "longer than 512 bytes".into(),
            },
            LockError::StaleToken {
                resource: "balance:7".into(),
                token,
                newest: FencingToken::new(9),
            },
            LockError::ReplicasNotConfirmed {
                key: key(),
                wanted: 2,
                confirmed: 1,
            },
            LockError::TooManyWaiters {
                key: key(),
                limit: 100,
            },
            LockError::NotInstalled { key: key() },
            LockError::invalid_config("ttl", "10ms is shorter than the minimum of 30ms"),
        ]
    }

    #[test]
    fn no_text_repeats_along_an_error_chain() {
        use std::error::Error as _;
        for err in every_variant() {
            let mut chain = vec![err.to_string()];
            let mut source = err.source();
            while let Some(cause) = source {
                chain.push(cause.to_string());
                source = cause.source();
            }
            for (i, text) in chain.iter().enumerate() {
                assert!(!text.contains("REDIS_URL"), "{text}");
                // Ours (the error and its StoreError) start in lowercase;
                // what the store said is quoted as it came.
                let first = text.chars().next().unwrap();
                assert!(i >= 2 || !first.is_uppercase(), "not lowercase: {text}");
                for later in &chain[i + 1..] {
                    assert!(
                        !text.contains(later.as_str()) && !later.contains(text.as_str()),
                        "{text:?} and {later:?} repeat each other"
                    );
                }
            }
        }
    }
}
