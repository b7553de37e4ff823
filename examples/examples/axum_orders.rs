//! An axum service whose payments are locked per order across replicas.
//!
//! ```text
//! cargo run -p examples --example axum_orders             # serve on 127.0.0.1:3000 (PORT)
//! cargo run -p examples --example axum_orders -- --demo   # serve on a free port, pay concurrently, print, exit
//! ```
//!
//! Runs on the embedded backend, or on Redis when `REDIS_URL` is set (run
//! two copies on different ports against one Redis: payments for one order
//! are still serialised).
//!
//! - `POST /orders/{id}/pay?cents=N`: locked on `order:<id>`; the handler
//!   gets the fencing token as an extractor and writes with it.
//! - `GET /orders/{id}`: unlocked.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use examples::store::OrderStore;
use lock_core::{FencingToken, Locker};
use lock_tower::{KeyFrom, LockLayer};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
struct Payment {
    cents: u64,
}

#[derive(Serialize)]
struct Paid {
    order: u64,
    total_cents: u64,
    token: u64,
}

async fn pay(
    State(store): State<Arc<OrderStore>>,
    Path(id): Path<u64>,
    Query(payment): Query<Payment>,
    token: FencingToken,
) -> Result<Json<Paid>, (StatusCode, String)> {
    // Some work under the lock (reading the order, calling a payment API...).
    tokio::time::sleep(Duration::from_millis(20)).await;
    match store.pay_fenced(id, payment.cents, token) {
        Ok(total_cents) => Ok(Json(Paid {
            order: id,
            total_cents,
            token: token.get(),
        })),
        Err(newer) => Err((
            StatusCode::CONFLICT,
            format!("token {token} is older than {newer}: this request's lock was lost"),
        )),
    }
}

async fn show(
    State(store): State<Arc<OrderStore>>,
    Path(id): Path<u64>,
) -> Result<String, StatusCode> {
    let order = store.get(id).ok_or(StatusCode::NOT_FOUND)?;
    Ok(format!(
        "order {id}: paid {} cents, newest token {}\n",
        order.paid_cents, order.fence
    ))
}

/// The service: payments locked per order, reads unlocked.
fn app(locker: Locker, store: Arc<OrderStore>) -> Router {
    let payments = Router::new().route("/orders/{id}/pay", post(pay)).layer(
        LockLayer::new(locker, KeyFrom::path("/orders/{id}/pay", "order:<id>"))
            .ttl(Duration::from_secs(10))
            .wait(Duration::from_secs(5)),
    );
    Router::new()
        .route("/orders/{id}", get(show))
        .merge(payments)
        .with_state(store)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    examples::init_tracing();
    let locker = Locker::from_env().await?;
    let store = Arc::new(OrderStore::default());
    let demo = examples::demo_mode();
    let listener = examples::bind(3000).await?;
    let addr = listener.local_addr()?;
    println!("serving on http://{addr} ({locker:?})");
    let server = tokio::spawn(axum::serve(listener, app(locker, store)).into_future());
    if !demo {
        server.await??;
        return Ok(());
    }
    demo_requests(addr).await?;
    server.abort();
    Ok(())
}

/// Ten concurrent payments of 10 cents on one order, then a read.
async fn demo_requests(addr: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let client: Client<_, Empty<bytes::Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let pays = (0..10).map(|_| {
        let client = client.clone();
        async move {
            let uri = format!("http://{addr}/orders/42/pay?cents=10").parse()?;
            let request = hyper::Request::post::<hyper::Uri>(uri).body(Empty::new())?;
            let response = client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(format!(
                "{status} {}",
                String::from_utf8_lossy(&body).trim()
            ))
        }
    });
    for line in futures_util::future::join_all(pays).await {
        println!(
            "POST /orders/42/pay -> {}",
            line.map_err(|e| e.to_string())?
        );
    }
    let response = client
        .get(format!("http://{addr}/orders/42").parse()?)
        .await?;
    let body = response.into_body().collect().await?.to_bytes();
    print!("GET /orders/42 -> {}", String::from_utf8_lossy(&body));
    Ok(())
}
