//! The route L and the in-process layer examples measure, and the stacks
//! it is served on: bare, behind a layer that does nothing (what axum's
//! `Router::layer` costs by itself), behind the minimal lock layer (a
//! yardstick: the least any lock layer does) and behind `LockLayer`.
//! Shared with the examples through `#[path]`, so that every figure is of
//! the same route and stacks.

use axum::Router;
use axum::body::Body;
use axum::routing::post;
use lock_core::Locker;
use lock_tower::{KeyFrom, LockLayer};
use tower::util::MapRequestLayer;

#[path = "minimal_layer.rs"]
mod minimal_layer;

/// What the route answers.
pub const PAID: &str = "paid\n";

/// A route's stack; `Layered` names the lock-core subject of its Locker.
pub enum Stack<'a> {
    Bare,
    Noop,
    Minimal,
    Layered(&'a Locker, &'static str),
}

impl Stack<'_> {
    pub fn label(&self) -> String {
        match self {
            Stack::Bare => "bare route".to_owned(),
            Stack::Noop => "a layer that does nothing".to_owned(),
            Stack::Minimal => "the minimal lock layer (a yardstick)".to_owned(),
            Stack::Layered(_, subject) => format!("LockLayer, {subject}"),
        }
    }
}

async fn pay() -> &'static str {
    PAID
}

/// `POST /orders/{id}` on `stack`; `LockLayer` locks `order:<id>`.
pub fn app(stack: &Stack<'_>) -> Router {
    let route = Router::new().route("/orders/{id}", post(pay));
    match stack {
        Stack::Bare => route,
        Stack::Noop => route.layer(MapRequestLayer::new(|request: http::Request<Body>| request)),
        Stack::Minimal => route.layer(minimal_layer::Layer::default()),
        Stack::Layered(locker, _) => route.layer(LockLayer::new(
            (*locker).clone(),
            KeyFrom::path("/orders/{id}", "order:<id>"),
        )),
    }
}
