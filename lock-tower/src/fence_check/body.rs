//! [`ResponseBody`]: the body of [`FenceCheck`](super::FenceCheck)'s
//! responses.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project::pin_project;

/// The inner service's body, or the text of the check's own answer.
#[pin_project]
pub struct ResponseBody<B> {
    #[pin]
    kind: Kind<B>,
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            Kind::Inner(_) => "inner",
            Kind::Answer(_) => "answer",
        };
        f.debug_struct("ResponseBody").field("kind", &kind).finish()
    }
}

#[pin_project(project = KindProj)]
enum Kind<B> {
    /// The inner service's body.
    Inner(#[pin] B),
    /// The check's answer to a request it refused.
    Answer(#[pin] Full<Bytes>),
}

impl<B> ResponseBody<B> {
    pub(super) fn inner(body: B) -> Self {
        let kind = Kind::Inner(body);
        ResponseBody { kind }
    }

    pub(super) fn answer(text: Bytes) -> Self {
        let kind = Kind::Answer(Full::new(text));
        ResponseBody { kind }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner(body) => body.poll_frame(cx),
            KindProj::Answer(text) => text
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(|never| match never {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner(body) => body.is_end_stream(),
            Kind::Answer(text) => text.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner(body) => body.size_hint(),
            Kind::Answer(text) => text.size_hint(),
        }
    }
}
