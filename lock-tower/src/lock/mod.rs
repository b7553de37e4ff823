//! The locking middleware: [`LockLayer`], [`LockService`], their
//! [`ResponseFuture`] and the [`LockBody`] that keeps the lock until the
//! response body is done.
//!
//! Per request: the extractor derives a key (or lets the request pass);
//! the lock is requested in `call` (never in `poll_ready`, which must not
//! wait) - a lock to be had at once (an uncontended one on the in-process
//! store) is taken there and then, and the ready inner service called
//! without cloning it; otherwise the request waits in the response future
//! with a clone of the inner service; the request gets the
//! [`FencingToken`](lock_core::FencingToken) and a
//! [`Lease`](lock_core::Lease) in its extensions; the handler runs in
//! the lock's task scope (so `FencingToken::current()` and reentrant
//! `#[distributed_lock]` functions see it); the response body carries the
//! guard and releases it when the body ends, fails, or is dropped.
//!
//! A layer takes plain locks; [`LockLayer::fair`] makes them fair locks
//! (requests served in arrival order), and [`LockLayer::read_write`] a
//! read-write lock per key: reads (by default the safe methods) share it,
//! writes take it alone.

mod body;
mod future;
mod layer;
mod service;

use lock_core::{LockKind, LockOptions};

pub use body::{BoxError, LockBody};
pub use future::ResponseFuture;
pub use layer::LockLayer;
pub use service::LockService;

/// What happens when the lease is lost while the handler runs (`Abort`,
/// the default: the lost-lease rejection, 503 / `UNAVAILABLE`).
pub use lock_core::OnLost;

/// Per-layer lock settings (an unset option: the Locker's default).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Settings {
    pub(crate) options: LockOptions,
    pub(crate) on_lost: OnLost,
    pub(crate) mode: Mode,
    /// A held lock is answered with [`Rejection::Skipped`](crate::Rejection::Skipped) at once.
    pub(crate) skips: bool,
}

/// Which lock a request takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// Every request the same kind (the plain lock unless told otherwise).
    Every(LockKind),
    /// The read lock when `reads` says so, else the write lock.
    ReadWrite { reads: Reads },
}

impl Default for Mode {
    fn default() -> Self {
        Mode::Every(LockKind::Exclusive)
    }
}

impl Mode {
    /// The kind of lock `request` takes.
    pub(crate) fn kind<B>(&self, request: &http::Request<B>) -> LockKind {
        match self {
            Mode::Every(kind) => *kind,
            Mode::ReadWrite { reads } if reads(request.method(), request.uri()) => LockKind::Read,
            Mode::ReadWrite { .. } => LockKind::Write,
        }
    }
}

/// Which requests of a read-write layer take the read lock.
pub type Reads = fn(&http::Method, &http::Uri) -> bool;

/// The default of [`LockLayer::read_write`]: the safe methods (GET, HEAD,
/// OPTIONS) read, every other method writes.
///
/// ```
/// use http::{Method, Uri};
/// use lock_tower::lock::safe_methods_read;
///
/// let uri = Uri::from_static("/orders/42");
/// assert!(safe_methods_read(&Method::GET, &uri));
/// assert!(!safe_methods_read(&Method::PUT, &uri));
/// ```
pub fn safe_methods_read(method: &http::Method, _: &http::Uri) -> bool {
    use http::Method;
    [Method::GET, Method::HEAD, Method::OPTIONS].contains(method)
}
