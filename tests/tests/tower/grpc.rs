//! The layer in a tonic stack: a real gRPC client over TCP.

use std::sync::Arc;
use std::time::Duration;

use examples::orders::{Orders, OrdersClient, OrdersServer, PayReply, PayRequest};
use lock_core::{FencingToken, Locker};
use lock_tower::{KeyFrom, LockLayer};
use tonic::{Code, Request, Response, Status};

struct Service {
    seen: Arc<std::sync::Mutex<Vec<u64>>>,
}

#[tonic::async_trait]
impl Orders for Service {
    async fn pay(&self, request: Request<PayRequest>) -> Result<Response<PayReply>, Status> {
        let token = request
            .extensions()
            .get::<FencingToken>()
            .copied()
            .ok_or_else(|| Status::internal("no token"))?;
        assert_eq!(FencingToken::current(), Some(token));
        self.seen.lock().unwrap().push(token.get());
        Ok(Response::new(PayReply {
            total_cents: request.into_inner().cents,
            token: token.get(),
        }))
    }
}

async fn serve(locker: Locker, seen: Arc<std::sync::Mutex<Vec<u64>>>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let layer = LockLayer::new(locker, KeyFrom::header("order-id").prefix("order:"))
        .wait(Duration::from_millis(200));
    let incoming = futures_util::stream::unfold(listener, |l| async move {
        Some((l.accept().await.map(|(s, _)| s), l))
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(layer)
            .add_service(OrdersServer::new(Service { seen }))
            .serve_with_incoming(incoming),
    );
    addr
}

fn pay(order: &str) -> Request<PayRequest> {
    let mut request = Request::new(PayRequest {
        order_id: 1,
        cents: 5,
    });
    request
        .metadata_mut()
        .insert("order-id", order.parse().unwrap());
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_get_the_token_or_aborted() {
    let server = lock_testkit::RedisServer::start();
    let locker = Locker::redis(&server.url()).await.unwrap();
    let seen = Arc::default();
    let addr = serve(locker.clone(), Arc::clone(&seen)).await;
    let mut client = OrdersClient::connect(format!("http://{addr}"))
        .await
        .unwrap();

    let reply = client.pay(pay("1")).await.unwrap().into_inner();
    assert_eq!(seen.lock().unwrap().as_slice(), &[reply.token]);

    let holder = locker.lock("order:1").await.unwrap();
    let status = client.pay(pay("1")).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted, "{status:?}");
    assert!(status.message().contains("order:1"), "{}", status.message());
    holder.release().await.unwrap();

    let again = client.pay(pay("1")).await.unwrap().into_inner();
    assert!(again.token > reply.token);

    let long = "9".repeat(300);
    let status = client.pay(pay(&long)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
}
