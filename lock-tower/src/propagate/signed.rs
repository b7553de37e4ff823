//! [`PropagateSignedFencingTokenLayer`]: the `fencing-token` header and its
//! MAC, for a [`FenceCheckLayer::verify`](crate::FenceCheckLayer::verify)
//! downstream.

use std::task::{Context, Poll};

use http::Request;
use http::header::HeaderValue;
use lock_core::{FencingToken, Lease};
use tower::{Layer, Service};

use super::{FENCING_TOKEN_HEADER, outgoing_token};
use crate::extract::{Key, KeyExtractor};
use crate::signing::{FENCING_SIGNATURE_HEADER, SigningKey};

/// Names the resource of a signed token as the key of the lock it was
/// minted for: the request's [`Lease`] extension, else the current task's
/// ([`Lease::current`]). The default resource of
/// [`PropagateFencingTokenLayer::signed`](super::PropagateFencingTokenLayer::signed).
#[derive(Debug, Clone, Copy, Default)]
pub struct LockKey;

impl<B> KeyExtractor<B> for LockKey {
    fn extract(&self, request: &Request<B>) -> Key {
        let lease = request.extensions().get::<Lease>().cloned();
        match lease.or_else(Lease::current) {
            Some(lease) => Key::Lock(lease.key().to_owned()),
            None => Key::Pass,
        }
    }
}

/// Adds the `fencing-token` header and its `fencing-token-signature`: an
/// HMAC-SHA256 of the token and the resource `K` names, under a
/// [`SigningKey`]. Made by
/// [`PropagateFencingTokenLayer::signed`](super::PropagateFencingTokenLayer::signed).
///
/// A request with no token, or whose resource `K` does not name, goes out
/// unchanged; headers already set are kept.
///
/// ```
/// use lock_tower::{KeyFrom, PropagateFencingTokenLayer, SigningKey};
/// use tower::ServiceBuilder;
///
/// # fn wrap<C>(http_client: C) -> Result<(), lock_tower::InvalidSigningKey> {
/// let key = SigningKey::new("2026-11", [7u8; 32])?;
/// // Signed for the key of the lock held: `order:42` under `order:42`'s lock.
/// let layer = PropagateFencingTokenLayer::signed(key.clone());
/// // Or for the resource the downstream names, from the outgoing request.
/// let by_path = PropagateFencingTokenLayer::signed(key)
///     .resource(KeyFrom::path("/accounts/{id}", "account:<id>"));
/// let client = ServiceBuilder::new().layer(layer).service(http_client);
/// # let _ = (client, by_path);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PropagateSignedFencingTokenLayer<K = LockKey> {
    key: SigningKey,
    resource: K,
}

impl PropagateSignedFencingTokenLayer {
    pub(super) fn new(key: SigningKey) -> Self {
        PropagateSignedFencingTokenLayer {
            key,
            resource: LockKey,
        }
    }
}

impl<K> PropagateSignedFencingTokenLayer<K> {
    /// Signs for the resource `extractor` names in the outgoing request
    /// (the same the downstream's `FenceCheckLayer` uses), instead of the
    /// lock's key.
    pub fn resource<R>(self, extractor: R) -> PropagateSignedFencingTokenLayer<R> {
        PropagateSignedFencingTokenLayer {
            key: self.key,
            resource: extractor,
        }
    }
}

impl<S, K: Clone> Layer<S> for PropagateSignedFencingTokenLayer<K> {
    type Service = PropagateSignedFencingToken<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        PropagateSignedFencingToken {
            inner,
            key: self.key.clone(),
            resource: self.resource.clone(),
        }
    }
}

/// The service of [`PropagateSignedFencingTokenLayer`].
#[derive(Debug, Clone)]
pub struct PropagateSignedFencingToken<S, K> {
    inner: S,
    key: SigningKey,
    resource: K,
}

impl<S, K, B> Service<Request<B>> for PropagateSignedFencingToken<S, K>
where
    S: Service<Request<B>>,
    K: KeyExtractor<B>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if let (Some(token), Key::Lock(resource)) =
            (outgoing_token(&request), self.resource.extract(&request))
        {
            self.add(&mut request, &resource, token);
        }
        self.inner.call(request)
    }
}

impl<S, K> PropagateSignedFencingToken<S, K> {
    fn add<B>(&self, request: &mut Request<B>, resource: &str, token: FencingToken) {
        let headers = request.headers_mut();
        if headers.contains_key(FENCING_TOKEN_HEADER) {
            return;
        }
        headers.insert(FENCING_TOKEN_HEADER, HeaderValue::from(token.get()));
        headers.insert(FENCING_SIGNATURE_HEADER, self.key.sign(resource, token));
    }
}
