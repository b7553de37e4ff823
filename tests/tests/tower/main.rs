//! LockLayer in axum and tonic stacks, over real TCP, with real servers.

mod fence;
mod grpc;
mod http;

use std::net::SocketAddr;

use axum::Router;

/// Serves `app` on a free loopback port until the test ends.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}
