//! [`ResponseFuture`]: the response of [`FenceCheck`](super::FenceCheck).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::Response;
use pin_project::pin_project;

use super::ResponseBody;

/// The inner service's response, or the check's own answer (a request it
/// refused).
#[pin_project]
pub struct ResponseFuture<F> {
    #[pin]
    kind: Kind<F>,
}

impl<F> std::fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Inner(_) => "inner",
            Kind::Answer(_) => "answer",
        };
        f.debug_struct("ResponseFuture")
            .field("kind", &kind)
            .finish()
    }
}

#[pin_project(project = KindProj)]
enum Kind<F> {
    /// The request passed: the inner service answers.
    Inner(#[pin] F),
    /// The request was refused with this answer.
    Answer(Option<Response<Bytes>>),
}

impl<F> ResponseFuture<F> {
    pub(super) fn inner(future: F) -> Self {
        let kind = Kind::Inner(future);
        ResponseFuture { kind }
    }

    pub(super) fn answer(response: Response<Bytes>) -> Self {
        let kind = Kind::Answer(Some(response));
        ResponseFuture { kind }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner(future) => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(response.map(ResponseBody::inner)))
            }
            KindProj::Answer(answer) => {
                let answer = answer
                    .take()
                    .expect("ResponseFuture polled after completion");
                Poll::Ready(Ok(answer.map(ResponseBody::answer)))
            }
        }
    }
}
