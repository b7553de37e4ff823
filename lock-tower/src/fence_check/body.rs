//! [`ResponseBody`]: the body of [`FenceCheck`](super::FenceCheck)'s
//! responses.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use pin_project::pin_project;

/// The inner service's body, or the text of the check's own answer.
#[pin_project(project = ResponseBodyProj)]
pub enum ResponseBody<B> {
    /// The inner service's body.
    Inner(#[pin] B),
    /// The check's answer to a request it refused.
    Answer(#[pin] Full<Bytes>),
}

impl<B> ResponseBody<B> {
    pub(super) fn inner(body: B) -> Self {
        ResponseBody::Inner(body)
    }

    pub(super) fn answer(text: Bytes) -> Self {
        ResponseBody::Answer(Full::new(text))
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
        match self.project() {
            ResponseBodyProj::Inner(body) => body.poll_frame(cx),
            ResponseBodyProj::Answer(text) => text
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(|never| match never {}))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Inner(body) => body.is_end_stream(),
            ResponseBody::Answer(text) => text.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Inner(body) => body.size_hint(),
            ResponseBody::Answer(text) => text.size_hint(),
        }
    }
}
