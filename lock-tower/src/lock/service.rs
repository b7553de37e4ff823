use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use lock_core::Locker;
use tower::Service;

use super::future::{Answer, ResponseFuture};
use super::{LockBody, Settings};
use crate::extract::{Key, KeyExtractor};
use crate::rejection::{Protocol, Reject, Rejection};

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

impl<S, K, R, ReqB, ResB> Service<Request<ReqB>> for LockService<S, K, R>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    K: KeyExtractor<ReqB>,
    R: Reject,
    ResB: Body<Data = Bytes>,
{
    type Response = Response<LockBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqB, ResB, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let protocol = Protocol::of(&request);
        let key = match self.extractor.extract(&request) {
            Key::Pass => return ResponseFuture::passthrough(self.inner.call(request)),
            Key::Lock(key) => key,
            Key::Invalid(reason) => {
                let answer = self
                    .reject
                    .reject(Rejection::InvalidKey { reason }, protocol);
                return ResponseFuture::ready(answer.map(LockBody::full));
            }
        };
        let kind = self.settings.mode.kind(&request);
        let lock = self
            .locker
            .lock_of(key.as_str(), kind)
            .options(self.settings.options);
        let answer = Answer {
            key,
            reject: self.reject.clone(),
            protocol,
            skips: self.settings.skips,
        };
        let on_lost = self.settings.on_lost;
        // A lock to be had at once (an uncontended one on an in-process
        // store) is taken here, and the ready inner service called now; a
        // bad key fails here too, before any store round trip. A future
        // that is pending polls again with the real waker (futures must
        // take the latest one), and was merely started early.
        let mut acquire = lock.into_future();
        let mut at_once = Context::from_waker(Waker::noop());
        if let Poll::Ready(acquired) = Pin::new(&mut acquire).poll(&mut at_once) {
            return ResponseFuture::locked(acquired, &mut self.inner, request, on_lost, answer);
        }
        // The ready service goes with this request; a clone stays behind
        // (tower's "be careful when cloning inner services").
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ResponseFuture::locking(acquire, inner, request, on_lost, answer)
    }
}
