//! How Redis errors become [`StoreError`]s: transient (a connection, a
//! failover, a busy server), permanent (an error answer) or a [`Refusal`]
//! of this client (credentials, access rules, TLS).

use std::fmt;

use crate::error::{Applied, Refusal, StoreError};

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
        if transient {
            StoreError::transient(RedisCause(err), Applied::maybe_if(unknown))
        } else {
            StoreError::permanent(RedisCause(err)).unknown(unknown)
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
