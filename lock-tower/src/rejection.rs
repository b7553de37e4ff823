//! What the layer answers when it cannot lock a request, and how to change
//! it: [`Rejection`], the [`Reject`] trait and [`DefaultRejection`].

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use lock_core::{FencingToken, LockError};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

/// Why a request was not (or no longer) served under its lock.
///
/// ```
/// use std::time::Duration;
///
/// use lock_tower::Rejection;
///
/// let contended = Rejection::Contended {
///     key: "order:42".into(),
///     retry_after: Duration::from_millis(1_500),
/// };
/// assert_eq!(contended.http_status(), 423);
/// assert_eq!(contended.grpc_code(), 10); // ABORTED
/// assert_eq!(contended.retry_after_secs(), Some(2));
/// assert!(contended.message().contains("retry in 2s"), "{}", contended.message());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Rejection {
    /// Another holder kept the lock for the whole wait.
    Contended {
        /// The lock key.
        key: String,
        /// When to try again (from the holder's remaining lease).
        retry_after: Duration,
    },
    /// The lock store is unreachable or overloaded.
    Unavailable {
        /// The lock key.
        key: String,
        /// What lock-core reported.
        error: LockError,
    },
    /// The key derived from the request is unusable (empty, too long, not
    /// UTF-8).
    InvalidKey {
        /// What is wrong with it.
        reason: String,
    },
    /// The lock was held and the layer skips instead of waiting
    /// ([`LockLayer::if_held_skip`](crate::LockLayer::if_held_skip)): the
    /// handler did not run, since another request (or replica) is doing
    /// its work.
    Skipped {
        /// The lock key.
        key: String,
    },
    /// The lease was lost while the handler ran; the handler was stopped.
    Lost {
        /// The lock key.
        key: String,
        /// The lost lease's token.
        token: FencingToken,
    },
}

/// gRPC status codes used by the default answers.
mod grpc_code {
    pub(super) const INVALID_ARGUMENT: u8 = 3;
    pub(super) const ALREADY_EXISTS: u8 = 6;
    pub(super) const ABORTED: u8 = 10;
    pub(super) const UNAVAILABLE: u8 = 14;
}

impl Rejection {
    /// The HTTP status of the default answer.
    ///
    /// ```
    /// use lock_tower::Rejection;
    ///
    /// let skipped = Rejection::Skipped { key: "report:daily".into() };
    /// assert_eq!(skipped.http_status(), http::StatusCode::CONFLICT);
    /// ```
    pub fn http_status(&self) -> StatusCode {
        match self {
            Rejection::Contended { .. } => StatusCode::LOCKED,
            Rejection::Skipped { .. } => StatusCode::CONFLICT,
            Rejection::Unavailable { .. } | Rejection::Lost { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Rejection::InvalidKey { .. } => StatusCode::BAD_REQUEST,
        }
    }

    /// The gRPC status code of the default answer.
    ///
    /// ```
    /// use lock_tower::Rejection;
    ///
    /// let invalid = Rejection::InvalidKey { reason: "header `x-order-id` is empty".into() };
    /// assert_eq!(invalid.grpc_code(), 3); // INVALID_ARGUMENT
    /// ```
    pub fn grpc_code(&self) -> u8 {
        match self {
            Rejection::Contended { .. } => grpc_code::ABORTED,
            Rejection::Skipped { .. } => grpc_code::ALREADY_EXISTS,
            Rejection::Unavailable { .. } | Rejection::Lost { .. } => grpc_code::UNAVAILABLE,
            Rejection::InvalidKey { .. } => grpc_code::INVALID_ARGUMENT,
        }
    }

    /// `Retry-After` in whole seconds (at least 1), where it applies.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use lock_tower::Rejection;
    ///
    /// let soon = Rejection::Contended { key: "k".into(), retry_after: Duration::from_millis(10) };
    /// assert_eq!(soon.retry_after_secs(), Some(1));
    /// assert_eq!(Rejection::Skipped { key: "k".into() }.retry_after_secs(), None);
    /// ```
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Rejection::Contended { retry_after, .. } => {
                Some(retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0))
                    .map(|s| s.max(1))
            }
            Rejection::Unavailable { .. } | Rejection::Lost { .. } => Some(1),
            Rejection::InvalidKey { .. } | Rejection::Skipped { .. } => None,
        }
    }

    /// A one-line explanation for people and logs.
    ///
    /// ```
    /// use lock_core::FencingToken;
    /// use lock_tower::Rejection;
    ///
    /// let lost = Rejection::Lost { key: "order:42".into(), token: FencingToken::new(7) };
    /// assert!(lost.message().contains("token 7"), "{}", lost.message());
    /// ```
    pub fn message(&self) -> String {
        match self {
            // The same whole seconds as `Retry-After`.
            Rejection::Contended { key, .. } => format!(
                "lock `{key}` is held by another request; retry in {}s",
                self.retry_after_secs().unwrap_or(1)
            ),
            Rejection::Skipped { key } => {
                format!("lock `{key}` is held: this work is being done elsewhere; skipped")
            }
            Rejection::Unavailable { error, .. } => error.to_string(),
            Rejection::InvalidKey { reason } => format!("cannot lock this request: {reason}"),
            Rejection::Lost { key, token } => format!(
                "the lock `{key}` (token {token}) was lost while the request ran; it was stopped, retry"
            ),
        }
    }

    /// Sorts a lock-core error into a rejection: a held lock is `Skipped`
    /// when the layer skips.
    pub(crate) fn from_error(key: &str, error: LockError, skips: bool) -> Self {
        match error {
            LockError::WaitTimeout { .. } if skips => Rejection::Skipped {
                key: key.to_owned(),
            },
            LockError::WaitTimeout {
                holder_expires_in, ..
            } => Rejection::Contended {
                key: key.to_owned(),
                retry_after: holder_expires_in.unwrap_or(Duration::from_secs(1)),
            },
            LockError::InvalidKey { reason, .. } => Rejection::InvalidKey { reason },
            LockError::Lost { token, .. } => Rejection::Lost {
                key: key.to_owned(),
                token,
            },
            error => Rejection::Unavailable {
                key: key.to_owned(),
                error,
            },
        }
    }
}

/// The protocol a request speaks, so that it is answered in its terms.
///
/// ```
/// use lock_tower::Protocol;
///
/// let grpc = http::Request::post("/orders.Orders/Pay")
///     .header("content-type", "application/grpc+proto")
///     .body(())
///     .unwrap();
/// assert_eq!(Protocol::of(&grpc), Protocol::Grpc);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Protocol {
    /// Plain HTTP: a status code and a text body.
    Http,
    /// gRPC (`content-type: application/grpc*`): HTTP 200 with a
    /// `grpc-status` in its headers.
    Grpc,
}

impl Protocol {
    /// The protocol of `request`, from its `content-type`.
    ///
    /// ```
    /// use lock_tower::Protocol;
    ///
    /// let plain = http::Request::get("/orders/42").body(()).unwrap();
    /// assert_eq!(Protocol::of(&plain), Protocol::Http);
    /// ```
    pub fn of<B>(request: &http::Request<B>) -> Self {
        let content_type = request.headers().get(CONTENT_TYPE);
        let grpc = content_type
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/grpc"));
        if grpc { Protocol::Grpc } else { Protocol::Http }
    }
}

/// Turns a [`Rejection`] into a response, in the terms of the request's
/// [`Protocol`].
///
/// Any `Fn(Rejection, Protocol) -> Response<Bytes> + Clone + Send + Sync +
/// 'static` is a `Reject`.
///
/// ```
/// use bytes::Bytes;
/// use http::{Response, StatusCode};
/// use lock_tower::{DefaultRejection, Protocol, Reject, Rejection};
///
/// /// Contention as `429 Too Many Requests`; the rest as by default.
/// #[derive(Clone)]
/// struct TooMany;
///
/// impl Reject for TooMany {
///     fn reject(&self, rejection: Rejection, protocol: Protocol) -> Response<Bytes> {
///         match (&rejection, protocol) {
///             (Rejection::Contended { .. }, Protocol::Http) => {
///                 let mut response = Response::new(Bytes::from(rejection.message()));
///                 *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
///                 response
///             }
///             _ => DefaultRejection.reject(rejection, protocol),
///         }
///     }
/// }
///
/// let contended = Rejection::Contended { key: "k".into(), retry_after: Default::default() };
/// assert_eq!(TooMany.reject(contended, Protocol::Http).status(), 429);
/// ```
pub trait Reject: Clone + Send + Sync + 'static {
    /// The answer to send.
    ///
    /// ```
    /// use lock_tower::{DefaultRejection, Protocol, Reject, Rejection};
    ///
    /// let invalid = Rejection::InvalidKey { reason: "query parameter `id` is empty".into() };
    /// assert_eq!(DefaultRejection.reject(invalid, Protocol::Http).status(), 400);
    /// ```
    fn reject(&self, rejection: Rejection, protocol: Protocol) -> Response<Bytes>;
}

impl<F> Reject for F
where
    F: Fn(Rejection, Protocol) -> Response<Bytes> + Clone + Send + Sync + 'static,
{
    fn reject(&self, rejection: Rejection, protocol: Protocol) -> Response<Bytes> {
        self(rejection, protocol)
    }
}

/// The default answers: `423 Locked` with `Retry-After` for contention,
/// `409 Conflict` for a skip, `503` for an unreachable store or a lost
/// lease, `400` for a bad key; for gRPC a trailers-only response with
/// `ABORTED`, `ALREADY_EXISTS`, `UNAVAILABLE` or `INVALID_ARGUMENT`.
///
/// ```
/// use std::time::Duration;
///
/// use lock_tower::{DefaultRejection, Protocol, Reject, Rejection};
///
/// let contended = || Rejection::Contended {
///     key: "order:42".into(),
///     retry_after: Duration::from_secs(3),
/// };
/// let http = DefaultRejection.reject(contended(), Protocol::Http);
/// assert_eq!(http.status(), 423);
/// assert_eq!(http.headers()["retry-after"], "3");
/// let grpc = DefaultRejection.reject(contended(), Protocol::Grpc);
/// assert_eq!(grpc.status(), 200);
/// assert_eq!(grpc.headers()["grpc-status"], "10");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultRejection;

/// grpc-message is percent-encoded (gRPC over HTTP/2 spec).
const GRPC_MESSAGE: &AsciiSet = &CONTROLS.add(b'%').add(b' ').add(b'"').add(b'`');

impl Reject for DefaultRejection {
    fn reject(&self, rejection: Rejection, protocol: Protocol) -> Response<Bytes> {
        let message = rejection.message();
        if protocol == Protocol::Grpc {
            return grpc_rejection(rejection.grpc_code(), &message);
        }
        let mut response = Response::new(Bytes::from(format!("{message}\n")));
        *response.status_mut() = rejection.http_status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if let Some(secs) = rejection.retry_after_secs() {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// A trailers-only gRPC response: HTTP 200, the status in the headers.
///
/// ```
/// use lock_tower::rejection::grpc_rejection;
///
/// let response = grpc_rejection(14, "the lock store is unreachable");
/// assert_eq!(response.headers()["grpc-status"], "14");
/// assert_eq!(response.headers()["grpc-message"], "the%20lock%20store%20is%20unreachable");
/// ```
pub fn grpc_rejection(code: u8, message: &str) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from(u16::from(code)));
    let encoded = utf8_percent_encode(message, GRPC_MESSAGE).to_string();
    if let Ok(value) = HeaderValue::from_str(&encoded) {
        headers.insert("grpc-message", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_409_or_already_exists_without_retry_after() {
        let skipped = || Rejection::Skipped {
            key: "job:report".into(),
        };
        let response = DefaultRejection.reject(skipped(), Protocol::Http);
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert!(response.headers().get(RETRY_AFTER).is_none());
        let response = DefaultRejection.reject(skipped(), Protocol::Grpc);
        assert_eq!(response.headers()["grpc-status"], "6");
    }

    #[test]
    fn contention_is_423_with_retry_after() {
        let r = Rejection::Contended {
            key: "order:1".into(),
            retry_after: Duration::from_millis(2500),
        };
        let response = DefaultRejection.reject(r, Protocol::Http);
        assert_eq!(response.status(), StatusCode::LOCKED);
        assert_eq!(response.headers()[RETRY_AFTER], "3");
    }

    #[test]
    fn grpc_gets_trailers_only_status() {
        let r = Rejection::InvalidKey {
            reason: "empty \"x\"".into(),
        };
        let response = DefaultRejection.reject(r, Protocol::Grpc);
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "3");
        assert!(
            response.headers()["grpc-message"]
                .to_str()
                .unwrap()
                .contains("%20")
        );
    }
}
