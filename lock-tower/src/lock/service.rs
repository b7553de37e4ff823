use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use lock_core::{LockError, Locker};
use tower::Service;

use super::future::ResponseFuture;
use super::{LockBody, OnLost, Settings};
use crate::extract::KeyExtractor;
use crate::rejection::{Reject, Rejection};

/// The service [`LockLayer`](super::LockLayer) wraps around `S`.
#[derive(Debug, Clone)]
pub struct LockService<S, K, R> {
    inner: S,
    locker: Locker,
    extractor: K,
    settings: Settings,
    reject: R,
}

impl<S, K, R> LockService<S, K, R> {
    pub(crate) fn new(
        inner: S,
        locker: Locker,
        extractor: K,
        settings: Settings,
        reject: R,
    ) -> Self {
        LockService {
            inner,
            locker,
            extractor,
            settings,
            reject,
        }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

fn is_grpc<B>(request: &Request<B>) -> bool {
    request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

impl<S, K, R, ReqB, ResB> Service<Request<ReqB>> for LockService<S, K, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    K: KeyExtractor<ReqB>,
    R: Reject,
    ReqB: Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
{
    type Response = Response<LockBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let grpc = is_grpc(&request);
        let key = match self.extractor.extract(&request) {
            None => return ResponseFuture::passthrough(self.inner.call(request)),
            Some(Ok(key)) => key,
            Some(Err(reason)) => {
                let answer = self.reject.reject(Rejection::InvalidKey { reason }, grpc);
                return ResponseFuture::ready(answer.map(LockBody::full));
            }
        };
        // Bad keys are answered at once, without a store round trip.
        if let Err(LockError::InvalidKey { reason, .. }) = self.locker.check_key(&key) {
            let answer = self.reject.reject(Rejection::InvalidKey { reason }, grpc);
            return ResponseFuture::ready(answer.map(LockBody::full));
        }
        // The ready service goes with this request; a clone stays behind
        // (tower's "be careful when cloning inner services").
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let locked = serve_locked(
            inner,
            self.locker.clone(),
            key,
            self.settings,
            self.reject.clone(),
            grpc,
            request,
        );
        ResponseFuture::locked(Box::pin(locked))
    }
}

/// Takes the lock, runs the handler as its holder, and hands the guard to
/// the response body.
async fn serve_locked<S, R, ReqB, ResB>(
    mut inner: S,
    locker: Locker,
    key: String,
    settings: Settings,
    reject: R,
    grpc: bool,
    mut request: Request<ReqB>,
) -> Result<Response<LockBody<ResB>>, S::Error>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    R: Reject,
{
    let mut lock = locker.lock(key.as_str());
    if let Some(ttl) = settings.ttl {
        lock = lock.ttl(ttl);
    }
    if let Some(wait) = settings.wait {
        lock = lock.wait(wait);
    }
    let guard = match lock.await {
        Ok(guard) => guard,
        Err(error) => {
            tracing::debug!(%key, %error, "request not locked");
            let answer = reject.reject(Rejection::from_error(&key, error), grpc);
            return Ok(answer.map(LockBody::full));
        }
    };
    request.extensions_mut().insert(guard.token());
    request.extensions_mut().insert(guard.lease());
    let handler = guard.scope(inner.call(request));
    let response = match settings.on_lost {
        OnLost::Continue => handler.await?,
        OnLost::Abort => {
            let lost = guard.lost();
            tokio::select! {
                biased;
                response = handler => response?,
                _ = lost => {
                    let rejection = Rejection::Lost { key, token: guard.token() };
                    return Ok(reject.reject(rejection, grpc).map(LockBody::full));
                }
            }
        }
    };
    Ok(response.map(|body| LockBody::locked(body, guard)))
}
