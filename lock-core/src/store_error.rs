//! [`StoreError`]: what a store's failure is, for deciding what to do
//! about it: transient (wait it out), permanent (an error answer), or a
//! [`Refusal`] of this client (a setting to fix).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

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
///   retry helps, and [`LockError`](crate::LockError) has a variant for each.
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
/// out. Each has its own [`LockError`](crate::LockError) variant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The URL does not parse.
    InvalidUrl,
    /// The URL's scheme (here) is one this build cannot connect with.
    UnsupportedScheme(String),
    /// Wrong user name or password.
    AuthenticationFailed,
    /// The TLS handshake failed (the server's certificate is not trusted,
    /// or the two sides share no protocol).
    TlsRejected,
    /// The store needs a password and none was given.
    PasswordRequired,
    /// The store's access rules deny a command, key or channel.
    PermissionDenied,
    /// The store holds a lock value of format version `stored` (`0`:
    /// none), which this client, reading format `ours`, cannot read.
    UnknownFormat {
        /// The version of the value in the store.
        stored: u32,
        /// The version this client reads and writes.
        ours: u32,
    },
    /// A semaphore's (or striped lock's) holders use `stored` permits (or
    /// segments); this client asked for `asked`.
    SizeDisagrees {
        /// `"permits"` or `"segments"`.
        what: &'static str,
        /// The number this request named.
        asked: u32,
        /// The number the key's holders use.
        stored: u32,
    },
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

    /// A request of a claim the store does not keep (not applied).
    pub(crate) fn unsupported(claim: crate::claim::Claim) -> Self {
        StoreError::permanent(format!("this store does not keep {claim} locks"))
    }

    /// A request naming `asked` permits or segments (`what`) where the
    /// holders use `stored` (not applied).
    pub(crate) fn size_disagrees(what: &'static str, asked: u32, stored: u32) -> Self {
        let message = format!("the key's holders use {stored} {what}, not {asked}");
        let refusal = Refusal::SizeDisagrees {
            what,
            asked,
            stored,
        };
        StoreError::refused(refusal, message)
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
const TRANSIENT_ANSWERS: [&str; 9] = [
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "READONLY",
    "NOREPLICAS",
    // A slot on the move (the cluster client follows it, and may run out
    // of redirections while a failover is under way).
    "MOVED",
    "ASK",
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
            // A command a script calls is denied with an `ERR` that quotes
            // the denial (`NOPERM`), or, before Redis 7.2, that says "The
            // user executing the script can't run this command / access at
            // least one of the keys / publish to the channel".
            _ if err.detail().is_some_and(|d| {
                d.contains("NOPERM") || d.contains("The user executing the script can't")
            }) =>
            {
                Some(Refusal::PermissionDenied)
            }
            _ if tls_failed(&err) => Some(Refusal::TlsRejected),
            _ => None,
        };
        if let Some(refusal) = refusal {
            return StoreError::refused(refusal, RedisCause(err));
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
        let error = StoreError::new(RedisCause(err), unknown);
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

/// A Redis error as a cause. Its own cause is left out where it only repeats
/// its message, as an I/O error's does: a chain printed cause by cause then
/// names "connection refused" once.
#[derive(Debug)]
struct RedisCause(redis::RedisError);

impl fmt::Display for RedisCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for RedisCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let source = std::error::Error::source(&self.0)?;
        (source.to_string() != self.0.to_string()).then_some(source)
    }
}

/// Whether `err` comes from a failed TLS handshake (a rustls error in its
/// chain of causes): no retry fixes that.
#[cfg(feature = "tls")]
fn tls_failed(err: &redis::RedisError) -> bool {
    use std::error::Error;
    use std::io;
    use std::sync::Arc;
    let mut cause: Option<&(dyn Error + 'static)> = Error::source(err);
    while let Some(error) = cause {
        // redis-rs keeps an I/O error as an `Arc<dyn Error>`, and an I/O
        // error's own source skips the error it wraps: look inside both.
        let shared = error.downcast_ref::<Arc<dyn Error + Send + Sync>>();
        let error: &(dyn Error + 'static) = match shared {
            Some(shared) => &**shared,
            None => error,
        };
        let inner = error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref);
        if error.is::<rustls::Error>() || inner.is_some_and(|e| e.is::<rustls::Error>()) {
            return true;
        }
        cause = error.source();
    }
    false
}

#[cfg(not(feature = "tls"))]
fn tls_failed(_: &redis::RedisError) -> bool {
    false
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
            "-MOVED 3999 127.0.0.1:6381",
            "-ASK 3999 127.0.0.1:6381",
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
    fn a_cause_that_repeats_its_message_is_left_out() {
        let refused = redis::RedisError::from(std::io::Error::from_raw_os_error(111));
        let error = StoreError::from(refused);
        let mut chain = Vec::new();
        let mut cause = std::error::Error::source(&error);
        while let Some(next) = cause {
            chain.push(next.to_string());
            cause = next.source();
        }
        assert_eq!(chain, ["Connection refused (os error 111)"]);
    }
}
