//! [`FenceCheck`]: the service of [`FenceCheckLayer`](super::FenceCheckLayer).

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use http::{Request, Response, StatusCode};
use http_body::Body;
use tower::Service;

use super::{NewestTokens, ResponseBody, ResponseFuture};
use crate::extract::{Key, KeyExtractor};
use crate::propagate::fencing_token;
use crate::signing::{self, SigningKey};

/// The service of [`FenceCheckLayer`](super::FenceCheckLayer).
#[derive(Debug, Clone)]
pub struct FenceCheck<S, K> {
    pub(super) inner: S,
    pub(super) extractor: K,
    pub(super) newest: NewestTokens,
    pub(super) keys: Option<Arc<[SigningKey]>>,
}

fn answer(status: StatusCode, message: String) -> Response<Bytes> {
    let mut response = Response::new(Bytes::from(format!("{message}\n")));
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
    type Response = Response<ResponseBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqB>) -> Self::Future {
        let resource = match self.extractor.extract(&request) {
            Key::Pass => return ResponseFuture::inner(self.inner.call(request)),
            Key::Lock(resource) => resource,
            Key::Invalid(reason) => {
                return ResponseFuture::answer(answer(
                    StatusCode::BAD_REQUEST,
                    format!("cannot tell the resource of this request: {reason}"),
                ));
            }
        };
        let token = match fencing_token(request.headers()) {
            Ok(Some(token)) => token,
            Ok(None) => {
                return ResponseFuture::answer(answer(
                    StatusCode::PRECONDITION_REQUIRED,
                    format!("writes to `{resource}` must carry a `fencing-token` header"),
                ));
            }
            Err(err) => {
                return ResponseFuture::answer(answer(StatusCode::BAD_REQUEST, err.to_string()));
            }
        };
        if let Some(keys) = &self.keys
            && let Err(bad) = signing::verify(keys, request.headers(), &resource, token)
        {
            tracing::debug!(%resource, %token, %bad, "fencing token signature refused");
            crate::telemetry::bad_signature();
            let mut response = answer(
                StatusCode::UNAUTHORIZED,
                format!("{bad}: writes to `{resource}` must carry a signed fencing token"),
            );
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("fencing-token-signature"),
            );
            return ResponseFuture::answer(response);
        }
        if let Err(stale) = self.newest.observe(&resource, token) {
            tracing::debug!(%resource, %token, %stale, "stale fencing token rejected");
            crate::telemetry::refused();
            return ResponseFuture::answer(answer(
                StatusCode::CONFLICT,
                format!(
                    "fencing token {token} for `{resource}` {stale}: the writer's lock was \
                     lost; re-acquire and retry"
                ),
            ));
        }
        request.extensions_mut().insert(token);
        ResponseFuture::inner(self.inner.call(request))
    }
}
