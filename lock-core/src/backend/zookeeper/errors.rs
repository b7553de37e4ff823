//! What a ZooKeeper failure means for a lock ([`StoreError`]), and one
//! bounded request ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use zookeeper_client::Error;

use crate::store_error::{Refusal, StoreError};

/// Awaits `request` for at most `timeout`. `writes` says whether the
/// request changes the store: a write that fails on the way or runs out of
/// time may have been applied.
pub(super) async fn bounded<T>(
    timeout: Duration,
    writes: bool,
    request: impl Future<Output = Result<T, Error>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(Ok(reply)) => Ok(reply),
        Ok(Err(err)) => Err(store_error(err, writes)),
        Err(_) => Err(StoreError::timed_out(timeout).unknown(writes)),
    }
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
        | Error::NoHosts => StoreError::new(err, writes),
        // The session is gone, and its ephemeral nodes with it: nothing
        // this request put stands. The next request opens a new session.
        Error::SessionExpired | Error::SessionMoved | Error::ClientClosed => {
            StoreError::new(err, false)
        }
        _ => StoreError::permanent(err),
    }
}
