use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use lock_core::LockGuard;
use pin_project::pin_project;

use super::OnLost;
use super::future::Lost;

/// An error of a response body: the handler's, or the lost lease that cut it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The response body behind [`LockLayer`](super::LockLayer): the handler's
/// body, holding the lock until it ends (last frame, error, or drop - a
/// client that goes away mid-body releases the lock too); or the body of a
/// rejection.
///
/// A body that outlives its lease (a stream past the Locker's `max_hold`,
/// or a lease lost to the store) is cut with the
/// [`LockError::Lost`](lock_core::LockError::Lost) error under
/// [`OnLost::Abort`] (the client sees the response end early), and goes on
/// unlocked under [`OnLost::Continue`].
#[pin_project]
pub struct LockBody<B> {
    #[pin]
    kind: Kind<B>,
}

#[pin_project(project = KindProj)]
enum Kind<B> {
    Plain {
        #[pin]
        body: B,
    },
    Locked {
        #[pin]
        body: B,
        guard: Option<LockGuard>,
        /// Under `OnLost::Abort`: the guard's loss, watched while it streams.
        lost: Option<Lost>,
        on_lost: OnLost,
    },
    Full {
        data: Option<Bytes>,
    },
}

impl<B> LockBody<B> {
    pub(crate) fn plain(body: B) -> Self {
        LockBody {
            kind: Kind::Plain { body },
        }
    }

    pub(crate) fn locked(body: B, guard: LockGuard, lost: Option<Lost>, on_lost: OnLost) -> Self {
        LockBody {
            kind: Kind::Locked {
                body,
                guard: Some(guard),
                lost,
                on_lost,
            },
        }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        LockBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

impl<B> Body for LockBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut kind = self.project().kind;
        match kind.as_mut().project() {
            KindProj::Plain { body } => body.poll_frame(cx).map_err(Into::into),
            KindProj::Locked {
                mut body,
                guard,
                lost,
                on_lost,
            } => {
                if *on_lost == OnLost::Abort
                    && let Some(held) = guard.as_ref()
                {
                    let lost = lost.get_or_insert_with(|| Box::pin(held.lost()));
                    if let Poll::Ready(error) = lost.as_mut().poll(cx) {
                        // Cut with an error: a clean end would tell the
                        // client it has the whole body. Nothing follows it.
                        kind.set(Kind::Full { data: None });
                        return Poll::Ready(Some(Err(error.into())));
                    }
                }
                let frame = ready!(body.as_mut().poll_frame(cx)).map(|f| f.map_err(Into::into));
                let finished = match &frame {
                    None | Some(Err(_)) => true,
                    Some(Ok(_)) => body.is_end_stream(),
                };
                if finished {
                    // Dropping the guard releases in the background.
                    guard.take();
                }
                Poll::Ready(frame)
            }
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Plain { body } | Kind::Locked { body, .. } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Plain { body } | Kind::Locked { body, .. } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

impl<B> std::fmt::Debug for LockBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            Kind::Plain { .. } => "plain",
            Kind::Locked { guard: Some(_), .. } => "locked",
            Kind::Locked { guard: None, .. } => "released",
            Kind::Full { .. } => "full",
        };
        f.debug_struct("LockBody").field("kind", &kind).finish()
    }
}
