//! What an etcd failure means for a lock ([`StoreError`]), also for a
//! request bounded by the timeout ([`bounded`]).

use std::future::Future;
use std::time::Duration;

use etcd_client::Error;
use tonic::Code;

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

/// etcd answered that the lease named in a request is gone (it expired or
/// was revoked): nothing was applied.
#[derive(Debug, thiserror::Error)]
#[error("etcd no longer has the lease")]
pub(super) struct LeaseGone;

/// Whether `err` is etcd saying the lease is gone.
pub(super) fn lease_gone(err: &StoreError) -> bool {
    std::error::Error::source(err).is_some_and(|source| source.is::<LeaseGone>())
}

/// `err` as a [`StoreError`]; `writes` as in [`bounded`].
pub(super) fn store_error(err: Error, writes: bool) -> StoreError {
    if lease_not_found(&err) {
        return StoreError::permanent(LeaseGone);
    }
    let status = match &err {
        Error::GRpcStatus(status) => status,
        Error::InvalidUri(_) | Error::InvalidArgs(_) => {
            return StoreError::refused(Refusal::InvalidUrl, err);
        }
        _ => return StoreError::transient(err, Applied::maybe_if(writes)),
    };
    let says = |words: &str| status.message().contains(words);
    match status.code() {
        // An auth token that lapsed is refreshed on the next request.
        Code::Unauthenticated if says("invalid auth token") => {
            StoreError::transient(err, Applied::maybe_if(writes))
        }
        Code::Unauthenticated => StoreError::refused(Refusal::AuthenticationFailed, err),
        Code::InvalidArgument if says("authentication failed") => {
            StoreError::refused(Refusal::AuthenticationFailed, err)
        }
        Code::PermissionDenied => StoreError::refused(Refusal::PermissionDenied, err),
        // A leader change under way.
        _ if says("leader") => StoreError::transient(err, Applied::maybe_if(writes)),
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange | Code::NotFound => {
            StoreError::permanent(err)
        }
        _ => StoreError::transient(err, Applied::maybe_if(writes)),
    }
}

/// Whether etcd answered that a lease is gone.
fn lease_not_found(err: &Error) -> bool {
    matches!(err, Error::GRpcStatus(status)
        if status.code() == Code::NotFound && status.message().contains("lease not found"))
}
