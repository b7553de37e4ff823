//! Sending one request within its time bound: once more on a broken
//! connection ([`send_or_resend`]), or exactly once ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use crate::error::StoreError;

/// A reply, and whether the request may have been applied twice: its first
/// send broke off with its outcome unknown, and it was sent again.
pub(crate) struct Sent<T> {
    pub(crate) reply: T,
    pub(crate) maybe_twice: bool,
}

/// Sends a request made by `send`, and once more if the connection broke
/// before any reply (refused, reset, closed: the connection manager has
/// begun replacing it, and the second send waits for the new one), all
/// within `timeout`. Running out of time is an error whose outcome is
/// unknown (the request may have been applied), and is never resent.
///
/// Only requests that are safe to repeat go through here: an acquire is
/// idempotent per owner value, releases and renewals are owner-checked.
pub(crate) async fn send_or_resend<T, Fut>(
    timeout: Duration,
    mut send: impl FnMut() -> Fut,
) -> Result<Sent<T>, StoreError>
where
    Fut: Future<Output = redis::RedisResult<T>>,
{
    let sends = async {
        let first = match send().await {
            Ok(reply) => {
                return Ok(Sent {
                    reply,
                    maybe_twice: false,
                });
            }
            Err(err) if err.is_io_error() && !err.is_timeout() => StoreError::from(err),
            Err(err) => return Err(StoreError::from(err)),
        };
        tracing::debug!(error = %first, "connection broke; sending the request again on a fresh one");
        let in_doubt = first.outcome_unknown();
        match send().await {
            Ok(reply) => Ok(Sent {
                reply,
                maybe_twice: in_doubt,
            }),
            Err(err) => {
                let err = StoreError::from(err);
                let unknown = err.outcome_unknown() || in_doubt;
                Err(err.unknown(unknown))
            }
        }
    };
    bounded(timeout, sends).await
}

/// Awaits `request` for at most `timeout`; running out of it is an error
/// whose outcome is unknown (the request may have been applied).
pub(crate) async fn bounded<T, E>(
    timeout: Duration,
    request: impl Future<Output = Result<T, E>>,
) -> Result<T, StoreError>
where
    StoreError: From<E>,
{
    StoreError::bounded(timeout, true, request, |err, _| StoreError::from(err)).await
}
