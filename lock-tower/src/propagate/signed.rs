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

/// What an outgoing request's signature is for: a resource, and the token
/// signed for it (`None`: the request goes out unsigned).
pub trait SignFor<B>: Clone + Send + Sync + 'static {
    /// The resource and token of `request`.
    fn resource_and_token(&self, request: &Request<B>) -> Option<(String, FencingToken)>;
}

/// Signs the token of the lock the request is sent under for that lock's
/// key: the request's [`Lease`] extension, else the current task's
/// ([`Lease::current`]). The default of
/// [`PropagateFencingTokenLayer::signed`](super::PropagateFencingTokenLayer::signed).
#[derive(Debug, Clone, Copy, Default)]
pub struct LockKey;

impl<B> SignFor<B> for LockKey {
    fn resource_and_token(&self, request: &Request<B>) -> Option<(String, FencingToken)> {
        let lease = request.extensions().get::<Lease>().cloned();
        lease
            .or_else(Lease::current)
            .map(|lease| (lease.key().to_owned(), lease.token()))
    }
}

/// Signs the request's token (its extension, else the current task's) for
/// the resource an extractor names in the outgoing request; made by
/// [`PropagateSignedFencingTokenLayer::resource`].
#[derive(Debug, Clone)]
pub struct NamedResource<K>(K);

impl<B, K: KeyExtractor<B>> SignFor<B> for NamedResource<K> {
    fn resource_and_token(&self, request: &Request<B>) -> Option<(String, FencingToken)> {
        match self.0.extract(request) {
            Key::Lock(resource) => outgoing_token(request).map(|token| (resource, token)),
            _ => None,
        }
    }
}

/// Adds the `fencing-token` header and its `fencing-token-signature`: an
/// HMAC-SHA256 of the token and its resource (what `S` says: by default
/// the key of the lock held), under a [`SigningKey`]. Made by
/// [`PropagateFencingTokenLayer::signed`](super::PropagateFencingTokenLayer::signed).
///
/// A request with nothing to sign goes out unchanged, as does one whose
/// `fencing-token` header is already set (a downstream `verify` refuses it
/// then).
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
pub struct PropagateSignedFencingTokenLayer<S = LockKey> {
    key: SigningKey,
    sign_for: S,
}

impl PropagateSignedFencingTokenLayer {
    pub(super) fn new(key: SigningKey) -> Self {
        PropagateSignedFencingTokenLayer {
            key,
            sign_for: LockKey,
        }
    }
}

impl<S> PropagateSignedFencingTokenLayer<S> {
    /// Signs the request's token for the resource `extractor` names in the
    /// outgoing request (the one the downstream's `FenceCheckLayer` checks),
    /// instead of the lock's key. Whatever resource the request names gets
    /// the token signed: name only resources that lock guards.
    pub fn resource<K>(self, extractor: K) -> PropagateSignedFencingTokenLayer<NamedResource<K>> {
        PropagateSignedFencingTokenLayer {
            key: self.key,
            sign_for: NamedResource(extractor),
        }
    }
}

impl<I, S: Clone> Layer<I> for PropagateSignedFencingTokenLayer<S> {
    type Service = PropagateSignedFencingToken<I, S>;

    fn layer(&self, inner: I) -> Self::Service {
        PropagateSignedFencingToken {
            inner,
            key: self.key.clone(),
            sign_for: self.sign_for.clone(),
        }
    }
}

/// The service of [`PropagateSignedFencingTokenLayer`].
#[derive(Debug, Clone)]
pub struct PropagateSignedFencingToken<I, S> {
    inner: I,
    key: SigningKey,
    sign_for: S,
}

impl<I, S, B> Service<Request<B>> for PropagateSignedFencingToken<I, S>
where
    I: Service<Request<B>>,
    S: SignFor<B>,
{
    type Response = I::Response;
    type Error = I::Error;
    type Future = I::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if let Some((resource, token)) = self.sign_for.resource_and_token(&request) {
            self.add(&mut request, &resource, token);
        }
        self.inner.call(request)
    }
}

impl<I, S> PropagateSignedFencingToken<I, S> {
    fn add<B>(&self, request: &mut Request<B>, resource: &str, token: FencingToken) {
        let headers = request.headers_mut();
        if headers.contains_key(FENCING_TOKEN_HEADER) {
            return;
        }
        headers.insert(FENCING_TOKEN_HEADER, HeaderValue::from(token.get()));
        headers.insert(FENCING_SIGNATURE_HEADER, self.key.sign(resource, token));
    }
}
