use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use lock_core::LockGuard;
use pin_project::pin_project;

/// The response body behind [`LockLayer`](super::LockLayer): the handler's
/// body, holding the lock until it ends (last frame, error, or drop - a
/// client that goes away mid-body releases the lock too); or the body of a
/// rejection.
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

    pub(crate) fn locked(body: B, guard: LockGuard) -> Self {
        LockBody {
            kind: Kind::Locked {
                body,
                guard: Some(guard),
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
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        match self.project().kind.project() {
            KindProj::Plain { body } => body.poll_frame(cx),
            KindProj::Locked { mut body, guard } => {
                let frame = ready!(body.as_mut().poll_frame(cx));
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
