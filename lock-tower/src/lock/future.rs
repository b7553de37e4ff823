use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::Response;
use pin_project::pin_project;

use super::LockBody;

type Locked<B, E> = Pin<Box<dyn Future<Output = Result<Response<LockBody<B>>, E>> + Send>>;

/// The response future of [`LockService`](super::LockService).
#[pin_project]
pub struct ResponseFuture<F, B, E> {
    #[pin]
    kind: Kind<F, B, E>,
}

#[pin_project(project = KindProj)]
enum Kind<F, B, E> {
    /// No key: the inner future as is.
    Passthrough {
        #[pin]
        future: F,
    },
    /// Waiting for the lock, then the handler.
    Locked { future: Locked<B, E> },
    /// Answered without calling the inner service.
    Ready {
        response: Option<Response<LockBody<B>>>,
    },
}

impl<F, B, E> ResponseFuture<F, B, E> {
    pub(crate) fn passthrough(future: F) -> Self {
        ResponseFuture {
            kind: Kind::Passthrough { future },
        }
    }

    pub(crate) fn locked(future: Locked<B, E>) -> Self {
        ResponseFuture {
            kind: Kind::Locked { future },
        }
    }

    pub(crate) fn ready(response: Response<LockBody<B>>) -> Self {
        ResponseFuture {
            kind: Kind::Ready {
                response: Some(response),
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LockBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Passthrough { future } => {
                let response = ready!(future.poll(cx))?;
                Poll::Ready(Ok(response.map(LockBody::plain)))
            }
            KindProj::Locked { future } => future.as_mut().poll(cx),
            KindProj::Ready { response } => Poll::Ready(Ok(response
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}
