//! `FencingToken` as an axum extractor (feature `axum`): a handler behind
//! lock-tower's `LockLayer` takes `token: FencingToken`, or
//! `token: Option<FencingToken>` on routes where the layer may pass a
//! request through unlocked.

use std::convert::Infallible;

use axum_core::extract::{FromRequestParts, OptionalFromRequestParts};
use axum_core::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;

use crate::token::FencingToken;

/// The rejection when a handler asks for a `FencingToken` on a request that
/// holds no lock: a server misconfiguration, answered with 500.
///
/// ```
/// use axum_core::extract::FromRequestParts;
/// use axum_core::response::IntoResponse;
/// use lock_core::FencingToken;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // A request no LockLayer locked.
/// let (mut parts, ()) = http::Request::new(()).into_parts();
/// let refused = FencingToken::from_request_parts(&mut parts, &()).await.unwrap_err();
/// assert_eq!(refused.into_response().status(), 500);
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct NoLockOnRequest;

impl IntoResponse for NoLockOnRequest {
    fn into_response(self) -> Response {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "this route asks for a fencing token but no LockLayer locked the request; \
             add the layer or take Option<FencingToken>",
        )
            .into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for FencingToken {
    type Rejection = NoLockOnRequest;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<FencingToken>()
            .copied()
            .ok_or(NoLockOnRequest)
    }
}

impl<S: Send + Sync> OptionalFromRequestParts<S> for FencingToken {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &S,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(parts.extensions.get::<FencingToken>().copied())
    }
}
