//! [`FencingHeader`]: the propagated token as an axum extractor (feature
//! `axum`). A malformed header is answered with 400, never a panic.

use axum_core::extract::FromRequestParts;
use axum_core::response::{IntoResponse, Response};
use http::StatusCode;
use http::request::Parts;
use lock_core::FencingToken;

use crate::propagate::{InvalidFencingToken, fencing_token};

/// The `fencing-token` header of a request, if any.
///
/// ```
/// use lock_tower::FencingHeader;
///
/// async fn write(FencingHeader(token): FencingHeader) -> String {
///     match token {
///         Some(token) => format!("writing under token {token}"),
///         None => "no token: unfenced write refused".into(),
///     }
/// }
/// # let _ = write;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FencingHeader(pub Option<FencingToken>);

impl IntoResponse for InvalidFencingToken {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, self.to_string()).into_response()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for FencingHeader {
    type Rejection = InvalidFencingToken;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        fencing_token(&parts.headers).map(FencingHeader)
    }
}
