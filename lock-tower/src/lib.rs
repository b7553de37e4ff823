//! A tower [`Layer`](tower::Layer) that takes a distributed lock per
//! request, for axum and tonic stacks, and fencing-token propagation
//! between services.
//!
//! ```
//! use lock_core::Locker;
//! use lock_tower::{KeyFrom, LockLayer};
//!
//! let locker = Locker::memory(); // Locker::redis(url).await? across replicas
//! // Requests for the same order are serialised across every replica that
//! // shares the store; requests on other paths pass through.
//! let layer = LockLayer::new(locker, KeyFrom::path("/orders/{id}/pay", "order:<id>"));
//! // axum:  Router::new().route("/orders/{id}/pay", post(pay)).layer(layer)
//! // tonic: Server::builder().layer(layer).add_service(...)
//! # let _ = layer;
//! ```
//!
//! A complete axum service is `examples/examples/axum_orders.rs`, a tonic
//! one `examples/examples/tonic_orders.rs`.
//!
//! - [`LockLayer`] / [`LockService`]: the lock is taken in `call`, the
//!   handler runs as the lock's holder (`FencingToken::current()`,
//!   reentrant `#[distributed_lock]` calls), the request carries
//!   [`FencingToken`] and [`Lease`](lock_core::Lease) in its extensions
//!   (axum: `Extension<FencingToken>`, or `FencingToken` itself with
//!   lock-core's `axum` feature; tonic:
//!   `request.extensions().get::<FencingToken>()`), and the lock is held
//!   until the response body is finished or dropped.
//! - Key extractors: [`KeyFrom::path`], [`KeyFrom::header`],
//!   [`KeyFrom::query`], or any closure; see [`extract`].
//! - Rejections ([`rejection`]): `423 Locked` + `Retry-After` on contention,
//!   `503` when the store is down or the lease was lost mid-request, `400`
//!   for a bad key; gRPC requests get `ABORTED` / `UNAVAILABLE` /
//!   `INVALID_ARGUMENT` as trailers-only responses. Replaceable.
//! - [`PropagateFencingTokenLayer`] adds the current token to outgoing
//!   requests as a `fencing-token` header; [`fencing_token`] (and, with the
//!   `axum` feature, [`FencingHeader`]) read it downstream, and
//!   [`FenceCheckLayer`] answers `409 Conflict` to a request whose token is
//!   older than the newest seen for its resource.
//! - Signed tokens: [`PropagateFencingTokenLayer::signed`] adds an
//!   HMAC-SHA256 of the token and its resource under a [`SigningKey`], and
//!   [`FenceCheckLayer::verify`] answers `401` to a request without a valid
//!   one, so that callers cannot pick their own tokens.

#![deny(missing_debug_implementations)]

#[cfg(feature = "axum")]
mod axum;
pub mod extract;
pub mod fence_check;
pub mod lock;
mod propagate;
pub mod rejection;
mod signing;
mod telemetry;

#[cfg(feature = "axum")]
pub use axum::FencingHeader;
pub use extract::{Key, KeyExtractor, KeyFrom};
pub use fence_check::{FenceCheck, FenceCheckLayer, NewestTokens, Stale};
pub use lock::{LockLayer, LockService, OnLost};
pub use lock_core::FencingToken;
pub use propagate::{
    FENCING_TOKEN_HEADER, InvalidFencingToken, LockKey, NamedResource, PropagateFencingToken,
    PropagateFencingTokenLayer, PropagateSignedFencingToken, PropagateSignedFencingTokenLayer,
    SignFor, fencing_token,
};
pub use rejection::{DefaultRejection, Protocol, Reject, Rejection};
pub use signing::{
    FENCING_SIGNATURE_HEADER, InvalidSigningKey, MAX_KEY_ID_LEN, MIN_SECRET_LEN, SigningKey,
};
