//! L: an axum route behind `LockLayer` (memory, Redis) against the same
//! route without it, under HTTP load from a child process
//! (`lock-bench child load ...`) with keep-alive connections, each on its
//! own order ids (the layer's cost, not contention).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::stacks::{Stack, app};
use crate::stats::{Percentiles, Row};

/// How long each load runs.
const RUN_FOR: Duration = Duration::from_millis(500);

/// Loads per stack and round; the best one counts.
pub const REPEATS: usize = 3;

/// What the load generator saw.
#[derive(Debug, Serialize, Deserialize)]
struct Load {
    requests: u64,
    seconds: f64,
    latency_us: Vec<f64>,
}

/// Serves the route on `stack` and loads it from `connections` connections.
pub async fn l(stack: &Stack<'_>, connections: usize) -> Row {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(axum::serve(listener, app(stack)).into_future());
    let exe = std::env::current_exe().expect("own executable");
    let output = tokio::process::Command::new(exe)
        .arg("child")
        .arg("load")
        .arg(addr.to_string())
        .arg(connections.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the load generator");
    server.abort();
    assert!(output.status.success(), "load generator failed");
    let load: Load = serde_json::from_slice(&output.stdout).expect("load report");
    let mut latency: Vec<Duration> = load
        .latency_us
        .iter()
        .map(|us| Duration::from_secs_f64(us / 1e6))
        .collect();
    Row {
        ops_per_sec: load.requests as f64 / load.seconds,
        acquisitions: load.requests,
        acquire: Percentiles::of(&mut latency),
        ..Row::new(&format!("L c{connections}"), &stack.label())
    }
}

/// The child side: `<addr> <connections>`; prints a [`Load`] as JSON.
pub async fn child(args: &[String]) {
    let [addr, connections] = args else {
        panic!("usage: lock-bench child load <addr> <connections>");
    };
    let addr: SocketAddr = addr.parse().expect("address");
    let connections: u64 = connections.parse().expect("connections");
    let started = Instant::now();
    let end = started + RUN_FOR;
    let tasks: Vec<_> = (0..connections)
        .map(|connection| tokio::spawn(one_connection(addr, connection, end)))
        .collect();
    let mut latency_us = Vec::new();
    for task in tasks {
        latency_us.extend(task.await.expect("load task"));
    }
    let load = Load {
        requests: latency_us.len() as u64,
        seconds: started.elapsed().as_secs_f64(),
        latency_us,
    };
    println!("{}", serde_json::to_string(&load).expect("report"));
}

/// One keep-alive connection sending requests back to back until `end`.
async fn one_connection(addr: SocketAddr, connection: u64, end: Instant) -> Vec<f64> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut latency_us = Vec::new();
    let mut id = connection * 1_000_000;
    while Instant::now() < end {
        id += 1;
        let request = http::Request::post(format!("/orders/{id}"))
            .header(http::header::HOST, "bench")
            .body(Empty::<Bytes>::new())
            .expect("request");
        let t0 = Instant::now();
        sender.ready().await.expect("connection ready");
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.status(), http::StatusCode::OK, "order {id}");
        response.into_body().collect().await.expect("body");
        latency_us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    latency_us
}
