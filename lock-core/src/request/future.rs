//! [`LockFuture`]: what awaiting a [`LockRequest`] runs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tracing::Instrument;

use crate::acquire::{FirstStep, handed_over};
use crate::error::LockError;
use crate::guard::LockGuard;
use crate::request::LockRequest;

/// The future of a [`LockRequest`], which `.await` runs.
///
/// Its first poll takes what can be had at once (a reentrant lock; on a
/// store that answers in place, an uncontended lock) without allocating a
/// task's worth of state; every other acquisition goes on boxed, in a
/// `lock` tracing span. Cancel safe as [`LockRequest`] says.
#[must_use = "a LockFuture does nothing until awaited"]
pub struct LockFuture(Stage);

enum Stage {
    Start(Option<LockRequest>),
    Running(Pin<Box<dyn Future<Output = Result<LockGuard, LockError>> + Send>>),
}

impl LockFuture {
    pub(crate) fn new(request: LockRequest) -> Self {
        LockFuture(Stage::Start(Some(request)))
    }
}

impl Future for LockFuture {
    type Output = Result<LockGuard, LockError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let stage = &mut self.get_mut().0;
        if let Stage::Start(request) = stage {
            let request = request.take().expect("LockFuture polled after completion");
            let next = match request
                .checked()
                .map(|acquisition| acquisition.first_step())
            {
                Ok(FirstStep::Done(result)) => return Poll::Ready(handed_over(result)),
                Ok(next) => next,
                Err(err) => return Poll::Ready(Err(err)),
            };
            let span = next.span();
            *stage = Stage::Running(Box::pin(next.finish().instrument(span)));
        }
        match stage {
            Stage::Running(running) => running.as_mut().poll(cx),
            Stage::Start(_) => Poll::Pending,
        }
    }
}

impl std::fmt::Debug for LockFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match &self.0 {
            Stage::Start(_) => "start",
            Stage::Running(_) => "running",
        };
        f.debug_tuple("LockFuture").field(&stage).finish()
    }
}

#[cfg(test)]
mod tests {
    use std::future::{Future, IntoFuture};
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use crate::Locker;

    #[tokio::test]
    async fn an_uncontended_lock_in_process_is_taken_at_the_first_poll() {
        let locker = Locker::memory();
        let mut future = pin!(locker.lock("k").into_future());
        let Poll::Ready(guard) = future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        else {
            panic!("an in-process store with the key free answers at once");
        };
        let guard = guard.unwrap();
        assert!(guard.is_held());
        assert_eq!(locker.local_queues(), 1);
        guard.release().await.unwrap();
        assert_eq!(locker.local_queues(), 0, "the queue ends with the lease");
    }

    #[tokio::test]
    async fn a_held_lock_in_process_waits_and_is_then_taken() {
        let locker = Locker::memory();
        let held = locker.lock("k").await.unwrap();
        let mut waiting = Box::pin(locker.lock("k").into_future());
        let polled = waiting
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "the key is held");
        let first = held.token();
        held.release().await.unwrap();
        let next = waiting.await.unwrap();
        assert!(next.token() > first);
        next.release().await.unwrap();
        assert_eq!(locker.local_queues(), 0);
    }

    #[tokio::test]
    async fn an_invalid_key_fails_at_the_first_poll() {
        let locker = Locker::memory();
        let err = locker.lock("").await.unwrap_err();
        assert!(matches!(err, crate::LockError::InvalidKey { .. }), "{err}");
    }
}
