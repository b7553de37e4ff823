//! Fencing tokens across service boundaries: a client-side layer that adds
//! the current token to outgoing requests as a `fencing-token` header, and
//! [`fencing_token`] to read it back on the other side. Signed
//! ([`PropagateFencingTokenLayer::signed`]), the header carries a MAC that
//! [`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify) checks.

mod signed;

use std::fmt;
use std::task::{Context, Poll};

use http::Request;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use lock_core::FencingToken;
use tower::{Layer, Service};

pub use self::signed::{
    LockKey, NamedResource, PropagateSignedFencingToken, PropagateSignedFencingTokenLayer, SignFor,
};
use crate::SigningKey;

/// The header that carries a fencing token between services.
pub const FENCING_TOKEN_HEADER: HeaderName = HeaderName::from_static("fencing-token");

/// Adds the `fencing-token` header to outgoing requests: the token in the
/// request's extensions if any, else the current task's
/// ([`FencingToken::current`]). Requests made outside any lock go out
/// unchanged; a header already set is kept.
///
/// Unsigned, the header is trusted by whoever checks it: use it between
/// services that trust each other, and [`signed`](Self::signed) where a
/// caller could set its own header.
///
/// ```
/// use lock_tower::PropagateFencingTokenLayer;
/// use tower::ServiceBuilder;
///
/// # fn wrap<C>(http_client: C) {
/// let client = ServiceBuilder::new()
///     .layer(PropagateFencingTokenLayer)
///     .service(http_client);
/// # let _ = client;
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PropagateFencingTokenLayer;

impl PropagateFencingTokenLayer {
    /// The same header plus a `fencing-token-signature` under `key`, for a
    /// downstream [`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify);
    /// see [`PropagateSignedFencingTokenLayer`].
    pub fn signed(key: SigningKey) -> PropagateSignedFencingTokenLayer {
        PropagateSignedFencingTokenLayer::new(key)
    }
}

/// The token an outgoing request is sent under: its extension, else the
/// current task's.
fn outgoing_token<B>(request: &Request<B>) -> Option<FencingToken> {
    request
        .extensions()
        .get::<FencingToken>()
        .copied()
        .or_else(FencingToken::current)
}

impl<S> Layer<S> for PropagateFencingTokenLayer {
    type Service = PropagateFencingToken<S>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateFencingToken { inner }
    }
}

/// The service of [`PropagateFencingTokenLayer`].
#[derive(Debug, Clone)]
pub struct PropagateFencingToken<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for PropagateFencingToken<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if let Some(token) = outgoing_token(&request) {
            request
                .headers_mut()
                .entry(FENCING_TOKEN_HEADER)
                .or_insert_with(|| HeaderValue::from(token.get()));
        }
        self.inner.call(request)
    }
}

/// A `fencing-token` header that is not a decimal `u64`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidFencingToken {
    value: String,
}

impl fmt::Display for InvalidFencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the `fencing-token` header {:?} is not a decimal number",
            self.value
        )
    }
}

impl std::error::Error for InvalidFencingToken {}

/// Reads the `fencing-token` header: `Ok(None)` when absent, an error (to
/// answer with 400) when malformed.
///
/// ```
/// use http::HeaderMap;
/// use lock_core::FencingToken;
///
/// let mut headers = HeaderMap::new();
/// assert_eq!(lock_tower::fencing_token(&headers), Ok(None));
/// headers.insert("fencing-token", "42".parse().unwrap());
/// assert_eq!(lock_tower::fencing_token(&headers), Ok(Some(FencingToken::new(42))));
/// headers.insert("fencing-token", "forty-two".parse().unwrap());
/// assert!(lock_tower::fencing_token(&headers).is_err());
/// ```
pub fn fencing_token(headers: &HeaderMap) -> Result<Option<FencingToken>, InvalidFencingToken> {
    let Some(value) = headers.get(FENCING_TOKEN_HEADER) else {
        return Ok(None);
    };
    let shown = || InvalidFencingToken {
        value: String::from_utf8_lossy(value.as_bytes())
            .chars()
            .take(64)
            .collect(),
    };
    let text = value.to_str().map_err(|_| shown())?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(shown());
    }
    text.parse().map(Some).map_err(|_| shown())
}

#[cfg(test)]
mod tests;
