//! What a ZooKeeper failure means for a lock ([`StoreError`]), also for a
//! request bounded by the timeout ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use zookeeper_client::Error;

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

/// `err` as a [`StoreError`]; `writes` as in [`bounded`].
pub(super) fn store_error(err: Error, writes: bool) -> StoreError {
    match err {
        Error::NoAuth => StoreError::refused(Refusal::PermissionDenied, err),
        Error::AuthFailed => StoreError::refused(Refusal::AuthenticationFailed, err),
        // The connection broke (cleanly, reset, or a ping unanswered), the
        // session's task is gone, or the server is busy: the request may
        // have been applied.
        Error::ConnectionLoss
        | Error::Custom(_)
        | Error::UnexpectedError(_)
        | Error::Timeout
        | Error::Throttled
        | Error::NoHosts => StoreError::transient(err, Applied::maybe_if(writes)),
        // The session is gone, and its ephemeral nodes with it: nothing
        // this request put stands. The next request opens a new session.
        Error::SessionExpired | Error::SessionMoved | Error::ClientClosed => {
            StoreError::not_applied(err)
        }
        _ => StoreError::permanent(err),
    }
}
