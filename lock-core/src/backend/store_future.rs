//! [`StoreFuture`]: what every [`LockStore`](super::LockStore) call
//! returns, so that the trait is object-safe and a store in this process
//! answers without boxing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::future::BoxFuture;

/// What a [`LockStore`](super::LockStore) method returns: an answer the store already gave (a
/// store in this process answers in place, and then nothing is allocated)
/// or a boxed future for one that has to be awaited.
///
/// ```
/// use lock_core::backend::StoreFuture;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let now: StoreFuture<'_, u32> = StoreFuture::ready(7);
/// let later: StoreFuture<'_, u32> = StoreFuture::new(async { 8 });
/// assert_eq!(now.await + later.await, 15);
/// # }
/// ```
#[must_use = "a StoreFuture of a remote store does nothing until awaited"]
pub struct StoreFuture<'a, T>(Answer<'a, T>);

enum Answer<'a, T> {
    Ready(Option<T>),
    Pending(BoxFuture<'a, T>),
}

impl<'a, T> StoreFuture<'a, T> {
    /// An answer known now.
    pub fn ready(value: T) -> Self {
        StoreFuture(Answer::Ready(Some(value)))
    }

    /// An answer `future` will give (boxed).
    pub fn new(future: impl Future<Output = T> + Send + 'a) -> Self {
        StoreFuture(Answer::Pending(Box::pin(future)))
    }

    /// The answer if it is known without awaiting, else the future back.
    pub fn into_ready(self) -> Result<T, Self> {
        match self.0 {
            Answer::Ready(Some(value)) => Ok(value),
            other => Err(StoreFuture(other)),
        }
    }
}

// The answer is moved out, never pinned in place.
impl<T> Unpin for StoreFuture<'_, T> {}

impl<T> Future for StoreFuture<'_, T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match &mut self.get_mut().0 {
            Answer::Ready(value) => {
                Poll::Ready(value.take().expect("StoreFuture polled after completion"))
            }
            Answer::Pending(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> std::fmt::Debug for StoreFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.0 {
            Answer::Ready(_) => "ready",
            Answer::Pending(_) => "pending",
        };
        f.debug_tuple("StoreFuture").field(&state).finish()
    }
}
