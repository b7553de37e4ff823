//! What a MySQL failure means for a lock ([`StoreError`]), also for a
//! request bounded by the timeout ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use sqlx::Error;
use sqlx::mysql::MySqlDatabaseError;

use super::schema::FORMAT;
use crate::error::{Applied, Refusal, StoreError};

/// The server's error numbers lock-core tells apart.
mod number {
    pub(super) const ACCESS_DENIED: u16 = 1045;
    pub(super) const DATABASE_ACCESS_DENIED: u16 = 1044;
    pub(super) const BAD_DATABASE: u16 = 1049;
    pub(super) const TABLE_ACCESS_DENIED: u16 = 1142;
    pub(super) const COMMAND_DENIED: u16 = 1227;
    pub(super) const ROUTINE_ACCESS_DENIED: u16 = 1370;
    pub(crate) const NO_SUCH_TABLE: u16 = 1146;
    pub(super) const NO_SUCH_ROUTINE: u16 = 1305;
    /// A query ended by `KILL QUERY`: a wake-up connection's sleep.
    pub(crate) const INTERRUPTED: u16 = 1317;
    /// A transaction rolled back to end a deadlock.
    pub(crate) const DEADLOCK: u16 = 1213;
    /// A row lock waited for through `innodb_lock_wait_timeout`.
    pub(crate) const LOCK_WAIT_TIMEOUT: u16 = 1205;
}

pub(super) use number::{DEADLOCK, INTERRUPTED, LOCK_WAIT_TIMEOUT, NO_SUCH_TABLE};

/// Awaits `request` for at most `timeout`, its failure as a
/// [`StoreError`] ([`StoreError::bounded`]).
pub(super) async fn bounded<T>(
    timeout: Duration,
    writes: bool,
    request: impl Future<Output = Result<T, Error>>,
) -> Result<T, StoreError> {
    StoreError::bounded(timeout, writes, request, store_error).await
}

/// The server's error number of `err`, if the server answered with one.
pub(super) fn number_of(err: &Error) -> Option<u16> {
    match err {
        Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .map(|e| e.number()),
        _ => None,
    }
}

/// `err` as a [`StoreError`]: the refusals no retry fixes by what they
/// are, each naming what to change; the rest transient, with an unknown
/// outcome if `writes` and the server may have run it.
pub(super) fn store_error(err: Error, writes: bool) -> StoreError {
    let refusal = match number_of(&err) {
        Some(number::ACCESS_DENIED) if err.to_string().contains("using password: NO") => Some((
            Refusal::PasswordRequired,
            "MySQL asks for a password; add it to the URL (mysql://user:password@host/database)",
        )),
        Some(number::ACCESS_DENIED) => Some((
            Refusal::AuthenticationFailed,
            "MySQL refused the user name or password; fix them in the URL",
        )),
        Some(number::BAD_DATABASE) => Some((
            Refusal::InvalidUrl,
            "the database the URL names does not exist; create it or name another",
        )),
        Some(
            number::DATABASE_ACCESS_DENIED
            | number::TABLE_ACCESS_DENIED
            | number::COMMAND_DENIED
            | number::ROUTINE_ACCESS_DENIED,
        ) => Some((
            Refusal::PermissionDenied,
            "the user lacks a right the lock needs; grant what `lockctl schema` prints",
        )),
        Some(number::NO_SUCH_TABLE | number::NO_SUCH_ROUTINE) => Some((
            Refusal::UnknownFormat {
                stored: 0,
                ours: FORMAT,
            },
            "the namespace's lock tables or procedures are gone since connect; connect again \
             (the Locker makes them) or run what `lockctl schema` prints",
        )),
        _ if matches!(err, Error::Tls(_)) => Some((
            Refusal::TlsRejected,
            "the TLS handshake with MySQL failed; check the server's certificate and the URL's \
             ssl-mode",
        )),
        _ if matches!(err, Error::Configuration(_)) => Some((
            Refusal::InvalidUrl,
            "write the MySQL URL as mysql://[user[:password]@]host[:port]/database",
        )),
        _ => None,
    };
    match refusal {
        Some((refusal, what)) => StoreError::refused(refusal, Refused { what, source: err }),
        None => {
            // A statement the server answered with an error was not
            // applied (each procedure rolls back on one); one cut off on
            // the way may have been.
            let answered = matches!(err, Error::Database(_) | Error::RowNotFound);
            StoreError::transient(err, Applied::maybe_if(writes && !answered))
        }
    }
}

/// A refusal, with what to change; the server's words are its source.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
struct Refused {
    what: &'static str,
    source: Error,
}
