//! [`FenceCheckLayer`]: a downstream service's HTTP check of propagated
//! fencing tokens. A request for a resource must carry a `fencing-token`
//! header not older than the newest this service has seen for that
//! resource; an older one is answered `409 Conflict` and never reaches the
//! handler.
//!
//! The check and the record are atomic, but the handler's write comes
//! after: for a hard guarantee, also fence the write itself in the data
//! store (`lock_core::fence`). The newest tokens live in this process
//! (one entry per resource); replicas of a downstream service each keep
//! their own, which is why the store-level fence is the one to rely on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body::Body;
use lock_core::FencingToken;
use tower::{Layer, Service};

use crate::extract::{Key, KeyExtractor};
use crate::lock::{LockBody, ResponseFuture};
use crate::propagate::fencing_token;

/// Newest token seen per resource, shared by clones.
#[derive(Debug, Clone, Default)]
pub struct NewestTokens {
    newest: Arc<Mutex<HashMap<String, FencingToken>>>,
}

impl NewestTokens {
    /// Records `token` for `resource` unless a newer one was seen; returns
    /// the newer one then.
    pub fn observe(&self, resource: &str, token: FencingToken) -> Result<(), FencingToken> {
        let mut newest = self.newest.lock().unwrap_or_else(PoisonError::into_inner);
        match newest.get_mut(resource) {
            Some(seen) if *seen > token => Err(*seen),
            Some(seen) => {
                *seen = token;
                Ok(())
            }
            None => {
                newest.insert(resource.to_owned(), token);
                Ok(())
            }
        }
    }

    /// The newest token seen for `resource`.
    pub fn newest(&self, resource: &str) -> Option<FencingToken> {
        self.newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(resource)
            .copied()
    }
}

/// Rejects requests whose `fencing-token` is older than the newest seen for
/// the resource the extractor names (`409`); a missing token is `428`, a
/// malformed one `400`. Requests the extractor maps to `None` pass.
///
/// ```
/// use lock_tower::{FenceCheckLayer, KeyFrom};
///
/// // PUT /accounts/7 must carry a token not older than any seen for account:7.
/// let layer = FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>"));
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct FenceCheckLayer<K> {
    extractor: K,
    newest: NewestTokens,
}

impl<K> FenceCheckLayer<K> {
    /// Checks the resources `extractor` names.
    pub fn new(extractor: K) -> Self {
        FenceCheckLayer {
            extractor,
            newest: NewestTokens::default(),
        }
    }

    /// The table of newest tokens (to share it between routes, or inspect it).
    pub fn newest_tokens(&self) -> &NewestTokens {
        &self.newest
    }

    /// Uses `newest` as the table of newest tokens.
    pub fn with_newest_tokens(mut self, newest: NewestTokens) -> Self {
        self.newest = newest;
        self
    }
}

impl<S, K: Clone> Layer<S> for FenceCheckLayer<K> {
    type Service = FenceCheck<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceCheck {
            inner,
            extractor: self.extractor.clone(),
            newest: self.newest.clone(),
        }
    }
}

/// The service of [`FenceCheckLayer`].
#[derive(Debug, Clone)]
pub struct FenceCheck<S, K> {
    inner: S,
    extractor: K,
    newest: NewestTokens,
}

fn answer<B>(status: StatusCode, message: String) -> Response<LockBody<B>> {
    let mut response = Response::new(LockBody::full(Bytes::from(format!("{message}\n"))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl<S, K, ReqB, ResB> Service<Request<ReqB>> for FenceCheck<S, K>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    K: KeyExtractor<ReqB>,
    ResB: Body<Data = Bytes>,
{
    type Response = Response<LockBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqB, ResB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let resource = match self.extractor.extract(&request) {
            Key::Pass => return ResponseFuture::passthrough(self.inner.call(request)),
            Key::Lock(resource) => resource,
            Key::Invalid(reason) => {
                return ResponseFuture::ready(answer(
                    StatusCode::BAD_REQUEST,
                    format!("cannot tell the resource of this request: {reason}"),
                ));
            }
        };
        let token = match fencing_token(request.headers()) {
            Ok(Some(token)) => token,
            Ok(None) => {
                return ResponseFuture::ready(answer(
                    StatusCode::PRECONDITION_REQUIRED,
                    format!("writes to `{resource}` must carry a `fencing-token` header"),
                ));
            }
            Err(err) => {
                return ResponseFuture::ready(answer(StatusCode::BAD_REQUEST, err.to_string()));
            }
        };
        if let Err(newest) = self.newest.observe(&resource, token) {
            tracing::debug!(%resource, %token, %newest, "stale fencing token rejected");
            return ResponseFuture::ready(answer(
                StatusCode::CONFLICT,
                format!(
                    "fencing token {token} for `{resource}` is older than {newest}, which has \
                     already written: the writer's lock was lost; re-acquire and retry"
                ),
            ));
        }
        request.extensions_mut().insert(token);
        ResponseFuture::passthrough(self.inner.call(request))
    }
}
