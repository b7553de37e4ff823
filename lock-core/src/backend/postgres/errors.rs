//! What a PostgreSQL failure means for a lock ([`StoreError`]), also for a
//! request bounded by the timeout ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use tokio_postgres::Error;
use tokio_postgres::error::SqlState;

use super::schema::FORMAT;
use crate::error::{Applied, Refusal, StoreError};

/// Awaits `request` for at most `timeout`, its failure as a
/// [`StoreError`] ([`StoreError::bounded`]).
pub(super) async fn bounded<T>(
    timeout: Duration,
    writes: bool,
    request: impl Future<Output = Result<T, Error>>,
) -> Result<T, StoreError> {
    StoreError::bounded(timeout, writes, request, store_error).await
}

/// `err` as a [`StoreError`]: the refusals no retry fixes by what they
/// are, each naming what to change; the rest transient, with an unknown
/// outcome if `writes` and the server may have run it.
pub(super) fn store_error(err: Error, writes: bool) -> StoreError {
    let refusal = match err.code() {
        Some(code) if *code == SqlState::INVALID_PASSWORD => Some((
            Refusal::AuthenticationFailed,
            "PostgreSQL refused the user name or password; fix them in the URL",
        )),
        Some(code) if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => Some((
            Refusal::AuthenticationFailed,
            "PostgreSQL lets this user not connect (pg_hba.conf or the role); fix the user in \
             the URL or the server's rules",
        )),
        Some(code) if *code == SqlState::INVALID_CATALOG_NAME => Some((
            Refusal::InvalidUrl,
            "the database the URL names does not exist; create it or name another",
        )),
        Some(code)
            if *code == SqlState::UNDEFINED_TABLE
                || *code == SqlState::UNDEFINED_FUNCTION
                || *code == SqlState::INVALID_SCHEMA_NAME =>
        {
            Some((
                Refusal::UnknownFormat {
                    stored: 0,
                    ours: FORMAT,
                },
                "the namespace's lock tables or functions are gone since connect; connect \
                 again (the Locker makes them) or run what `lockctl schema` prints",
            ))
        }
        Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => Some((
            Refusal::PermissionDenied,
            "the role lacks a right the lock needs; grant what `lockctl schema` prints",
        )),
        _ if tls_failed(&err) => Some((
            Refusal::TlsRejected,
            "the server's TLS certificate does not check out against the trusted roots; \
             give its authority to `tls_root_certificates`",
        )),
        // tokio-postgres says so only in the error's cause.
        _ if std::error::Error::source(&err)
            .is_some_and(|cause| cause.to_string().contains("password missing")) =>
        {
            Some((
                Refusal::PasswordRequired,
                "PostgreSQL asks for a password; add it to the URL (postgres://user:password@host)",
            ))
        }
        _ => None,
    };
    match refusal {
        Some((refusal, what)) => StoreError::refused(refusal, Refused { what, source: err }),
        // The schema's functions refuse an isolation level other than read
        // committed, saying what to set: no retry changes it.
        None if err.code().is_some_and(|code| code.code() == "LK001") => StoreError::permanent(err),
        None => {
            // A statement the server answered with an error was not
            // applied; one cut off on the way may have been.
            let answered = err.code().is_some();
            StoreError::transient(err, Applied::maybe_if(writes && !answered))
        }
    }
}

/// Whether rustls turned the server down (its certificate, or the
/// handshake); an I/O error's own source skips the error it wraps, so
/// look inside those too.
#[cfg(feature = "tls")]
fn tls_failed(err: &Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(error) = cause {
        let inner = error
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        if error.is::<rustls::Error>() || inner.is_some_and(|e| e.is::<rustls::Error>()) {
            return true;
        }
        cause = error.source();
    }
    false
}

#[cfg(not(feature = "tls"))]
fn tls_failed(_: &Error) -> bool {
    false
}

/// A refusal, with what to change; the server's words are its source.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
struct Refused {
    what: &'static str,
    source: Error,
}
