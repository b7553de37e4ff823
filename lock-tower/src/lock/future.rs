use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use lock_core::{LockError, LockFuture, LockGuard, Scoped};
use pin_project::pin_project;
use tower::Service;

use super::{LockBody, OnLost};
use crate::rejection::{DefaultRejection, Protocol, Reject, Rejection};

pub(super) type Lost = Pin<Box<dyn Future<Output = LockError> + Send>>;

/// The response future of [`LockService`](super::LockService) (and of
/// [`FenceCheck`](crate::FenceCheck)): takes the lock, then runs the inner
/// service's future in the lock's scope, in place (an acquisition that has
/// to wait or talk to a remote store is boxed).
#[pin_project]
pub struct ResponseFuture<S, ReqB, B, R = DefaultRejection>
where
    S: Service<Request<ReqB>>,
{
    #[pin]
    state: State<S, ReqB, B, R>,
}

impl<S, ReqB, B, R> std::fmt::Debug for ResponseFuture<S, ReqB, B, R>
where
    S: Service<Request<ReqB>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

#[pin_project(project = StateProj)]
enum State<S, ReqB, B, R>
where
    S: Service<Request<ReqB>>,
{
    /// No key: the inner future as is.
    Passthrough {
        #[pin]
        future: S::Future,
    },
    /// Waiting for the lock; the request waits with it.
    Locking {
        acquire: LockFuture,
        /// Boxed: only a lock that is not to be had at once gets here.
        call: Option<Box<Call<S, ReqB, R>>>,
    },
    /// The handler runs as the lock's holder.
    Serving {
        #[pin]
        handler: Scoped<S::Future>,
        on_lost: OnLost,
        /// Resolves if the lease is lost; made once the handler has to wait
        /// (most answer on their first poll, and then need none).
        lost: Option<Lost>,
        guard: Option<LockGuard>,
        answer: Option<Answer<R>>,
    },
    /// Answered without the inner service (or finished).
    Ready {
        response: Option<Response<LockBody<B>>>,
    },
}

/// What the handler call needs once the lock is held.
struct Call<S, ReqB, R> {
    inner: S,
    request: Request<ReqB>,
    on_lost: OnLost,
    answer: Answer<R>,
}

/// How to answer a request whose lock could not be had or was lost.
pub(crate) struct Answer<R> {
    pub(crate) key: String,
    pub(crate) reject: R,
    pub(crate) protocol: Protocol,
    /// The layer skips held locks.
    pub(crate) skips: bool,
}

impl<R: Reject> Answer<R> {
    fn reject<B>(self, rejection: Rejection) -> Response<LockBody<B>> {
        self.reject
            .reject(rejection, self.protocol)
            .map(LockBody::full)
    }
}

impl<S, ReqB, B, R> ResponseFuture<S, ReqB, B, R>
where
    S: Service<Request<ReqB>>,
{
    pub(crate) fn passthrough(future: S::Future) -> Self {
        ResponseFuture {
            state: State::Passthrough { future },
        }
    }

    pub(crate) fn ready(response: Response<LockBody<B>>) -> Self {
        ResponseFuture {
            state: State::Ready {
                response: Some(response),
            },
        }
    }

    /// Waits for `acquire`, then calls `inner` with `request`.
    pub(crate) fn locking(
        acquire: LockFuture,
        inner: S,
        request: Request<ReqB>,
        on_lost: OnLost,
        answer: Answer<R>,
    ) -> Self {
        ResponseFuture {
            state: State::Locking {
                acquire,
                call: Some(Box::new(Call {
                    inner,
                    request,
                    on_lost,
                    answer,
                })),
            },
        }
    }

    /// Calls `inner` with `request` now, as the holder of the lock that
    /// `acquired` took (or answers with its error).
    pub(crate) fn locked(
        acquired: Result<LockGuard, LockError>,
        inner: &mut S,
        request: Request<ReqB>,
        on_lost: OnLost,
        answer: Answer<R>,
    ) -> Self
    where
        R: Reject,
    {
        ResponseFuture {
            state: start(acquired, inner, request, on_lost, answer),
        }
    }
}

impl<S, ReqB, B, R> Future for ResponseFuture<S, ReqB, B, R>
where
    S: Service<Request<ReqB>, Response = Response<B>>,
    R: Reject,
{
    type Output = Result<Response<LockBody<B>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let next = match self.as_mut().project().state.project() {
                StateProj::Passthrough { future } => {
                    let response = ready!(future.poll(cx))?;
                    return Poll::Ready(Ok(response.map(LockBody::plain)));
                }
                StateProj::Ready { response } => {
                    let response = response
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(response));
                }
                StateProj::Locking { acquire, call } => {
                    let acquired = ready!(Pin::new(acquire).poll(cx));
                    let Call {
                        mut inner,
                        request,
                        on_lost,
                        answer,
                    } = *call.take().expect("ResponseFuture polled after completion");
                    start(acquired, &mut inner, request, on_lost, answer)
                }
                StateProj::Serving {
                    handler,
                    on_lost,
                    lost,
                    guard,
                    answer,
                } => {
                    // The handler first: a response ready now is sent even
                    // if the lease was lost meanwhile (fenced writes catch
                    // the overlap).
                    if let Poll::Ready(response) = handler.poll(cx) {
                        let guard = guard.take().expect("the guard stays until the end");
                        let (lost, on_lost) = (lost.take(), *on_lost);
                        let response = response?;
                        return Poll::Ready(Ok(
                            response.map(|body| LockBody::locked(body, guard, lost, on_lost))
                        ));
                    }
                    let guard = guard.as_ref().expect("the guard stays until the end");
                    if *on_lost == OnLost::Continue {
                        return Poll::Pending;
                    }
                    // A loss before this point is seen at this first poll.
                    let lost = lost.get_or_insert_with(|| Box::pin(guard.lost()));
                    ready!(lost.as_mut().poll(cx));
                    let token = guard.token();
                    let answer = answer.take().expect("answered once");
                    let rejection = Rejection::Lost {
                        key: answer.key.clone(),
                        token,
                    };
                    // Dropping the handler's future and the guard here.
                    State::Ready {
                        response: Some(answer.reject(rejection)),
                    }
                }
            };
            self.as_mut().project().state.set(next);
        }
    }
}

/// The state after the lock's acquisition ended: the handler running as
/// the holder, or the rejection.
fn start<S, ReqB, B, R>(
    acquired: Result<LockGuard, LockError>,
    inner: &mut S,
    mut request: Request<ReqB>,
    on_lost: OnLost,
    answer: Answer<R>,
) -> State<S, ReqB, B, R>
where
    S: Service<Request<ReqB>>,
    R: Reject,
{
    let guard = match acquired {
        Ok(guard) => guard,
        Err(error) => {
            tracing::debug!(key = %answer.key, %error, "request not locked");
            let rejection = Rejection::from_error(&answer.key, error, answer.skips);
            return State::Ready {
                response: Some(answer.reject(rejection)),
            };
        }
    };
    request.extensions_mut().insert(guard.token());
    request.extensions_mut().insert(guard.lease());
    let handler = guard.scope(inner.call(request));
    State::Serving {
        handler,
        on_lost,
        lost: None,
        guard: Some(guard),
        answer: Some(answer),
    }
}
