//! A yardstick, not a lock library: the least a lock layer with
//! `LockLayer`'s API can do - a key from the path, a mutex-guarded set of
//! held keys, a token and a handle in the request extensions, the key given
//! back when the response is ready - and nothing else (no lease, expiry,
//! waiting line, owner or telemetry). It says how close to a bare route any
//! lock layer can come on this machine. Routes are `/orders/{id}`; keys are
//! distinct (a taken key is a bug of the workload, and panics).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::Request;

type BoxFuture<T> = std::pin::Pin<Box<dyn Future<Output = T> + Send>>;

/// The keys held now, and the next token.
#[derive(Default)]
struct Held {
    keys: Mutex<HashSet<String>>,
    next_token: AtomicU64,
}

/// The handle a handler finds in the extensions (carried, not read, here).
#[derive(Clone)]
struct Handle(#[allow(dead_code)] Arc<Held>);

/// The token a handler finds in the extensions (carried, not read, here).
#[derive(Clone, Copy)]
struct Token(#[allow(dead_code)] u64);

/// Wraps a route in [`Service`]; clones share one set of held keys.
#[derive(Clone, Default)]
pub struct Layer(Arc<Held>);

impl<S> tower::Layer<S> for Layer {
    type Service = Service<S>;

    fn layer(&self, inner: S) -> Service<S> {
        Service {
            inner,
            held: Arc::clone(&self.0),
        }
    }
}

/// Takes the request's key for the inner call and its response future.
#[derive(Clone)]
pub struct Service<S> {
    inner: S,
    held: Arc<Held>,
}

impl<S, B> tower::Service<Request<B>> for Service<S>
where
    S: tower::Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let id = request.uri().path().trim_start_matches("/orders/");
        let key = format!("order:{id}");
        let fresh = self
            .held
            .keys
            .lock()
            .expect("held keys")
            .insert(key.clone());
        assert!(fresh, "distinct keys in this workload");
        let token = self.held.next_token.fetch_add(1, Ordering::Relaxed);
        request.extensions_mut().insert(Token(token));
        request
            .extensions_mut()
            .insert(Handle(Arc::clone(&self.held)));
        let response = self.inner.call(request);
        let held = Arc::clone(&self.held);
        Box::pin(async move {
            let response = response.await;
            held.keys.lock().expect("held keys").remove(&key);
            response
        })
    }
}
