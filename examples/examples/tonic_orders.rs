//! The order service over gRPC (tonic), locked per order by `LockLayer`.
//!
//! ```text
//! cargo run -p examples --example tonic_orders             # serve on 127.0.0.1:50051 (PORT)
//! cargo run -p examples --example tonic_orders -- --demo   # serve on a free port, pay concurrently, print, exit
//! ```
//!
//! The key comes from the `order-id` metadata (a layer sees headers, not
//! the decoded message). A call that cannot get the lock within the wait
//! gets `Code::Aborted`; the handler reads the token from the request's
//! extensions.

use std::sync::Arc;
use std::time::Duration;

use examples::orders::{Orders, OrdersClient, OrdersServer, PayReply, PayRequest};
use examples::store::OrderStore;
use lock_core::{FencingToken, Locker};
use lock_tower::{KeyFrom, LockLayer};
use tonic::{Request, Response, Status};

struct OrderService {
    store: Arc<OrderStore>,
}

#[tonic::async_trait]
impl Orders for OrderService {
    async fn pay(&self, request: Request<PayRequest>) -> Result<Response<PayReply>, Status> {
        let token = *request.extensions().get::<FencingToken>().ok_or_else(|| {
            Status::failed_precondition("no lock on this call: send order-id metadata")
        })?;
        let PayRequest { order_id, cents } = request.into_inner();
        tokio::time::sleep(Duration::from_millis(20)).await;
        match self.store.pay_fenced(order_id, cents, token) {
            Ok(total_cents) => Ok(Response::new(PayReply {
                total_cents,
                token: token.get(),
            })),
            Err(newer) => Err(Status::aborted(format!(
                "token {token} is older than {newer}: the lock was lost"
            ))),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    examples::init_tracing();
    let locker = Locker::from_env().await?;
    let demo = examples::demo_mode();
    let listener = examples::bind(50051).await?;
    let addr = listener.local_addr()?;
    println!("serving gRPC on {addr} ({locker:?})");
    let service = OrderService {
        store: Arc::new(OrderStore::default()),
    };
    let layer = LockLayer::new(locker, KeyFrom::header("order-id").prefix("order:"))
        .wait(Duration::from_secs(5));
    let server = tonic::transport::Server::builder()
        .layer(layer)
        .add_service(OrdersServer::new(service))
        .serve_with_incoming(tokio_stream_from(listener));
    let server = tokio::spawn(server);
    if !demo {
        server.await??;
        return Ok(());
    }
    let client = OrdersClient::connect(format!("http://{addr}")).await?;
    let calls = (0..5).map(|_| {
        let mut client = client.clone();
        async move {
            let mut request = Request::new(PayRequest {
                order_id: 7,
                cents: 25,
            });
            request
                .metadata_mut()
                .insert("order-id", "7".parse().expect("ascii"));
            client.pay(request).await
        }
    });
    for reply in futures_util::future::join_all(calls).await {
        let reply = reply?.into_inner();
        println!(
            "Pay(order 7, 25) -> total {} with token {}",
            reply.total_cents, reply.token
        );
    }
    server.abort();
    Ok(())
}

/// Accepted connections as the stream tonic serves from.
fn tokio_stream_from(
    listener: tokio::net::TcpListener,
) -> impl futures_util::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    futures_util::stream::unfold(listener, |listener| async move {
        let accepted = listener.accept().await.map(|(stream, _)| stream);
        Some((accepted, listener))
    })
}
