//! What `LockLayer` costs per request without HTTP: an axum route called
//! in process by 16 tasks (distinct keys, memory backend), bare and behind
//! the layer, on 1 and 2 worker threads. Prints CPU microseconds per
//! request (workers x wall time / requests), so the figure is the layer's
//! own work, apart from sockets and the load generator.
//!
//! `cargo run --release -p lock-bench --example layer_cost`

use std::time::Instant;

use axum::Router;
use axum::body::Body;
use http::Request;
use lock_core::Locker;
use tower::ServiceExt;

use crate::stacks::{Stack, app};

const TASKS: u64 = 16;
const REQUESTS_PER_TASK: u64 = 20_000;

/// CPU µs per request of `app` on a runtime with `workers` threads.
fn per_request(app: &Router, workers: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let started = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let app = app.clone();
                tokio::spawn(async move {
                    for i in 0..REQUESTS_PER_TASK {
                        let uri = format!("/orders/{}", task * 1_000_000 + i);
                        let request = Request::post(uri).body(Body::empty()).expect("request");
                        let response = app.clone().oneshot(request).await.expect("response");
                        let body = axum::body::to_bytes(response.into_body(), 64).await;
                        assert_eq!(&body.expect("body")[..], stacks::PAID.as_bytes());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        let requests = (TASKS * REQUESTS_PER_TASK) as f64;
        started.elapsed().as_secs_f64() * 1e6 * workers as f64 / requests
    })
}

/// The route and its stacks, shared with lock-bench's L workload (not
/// every item is used here).
#[allow(dead_code)]
#[path = "../src/stacks.rs"]
mod stacks;

fn main() {
    let locker = Locker::memory();
    let route = app(&Stack::Bare);
    let layered = app(&Stack::Layered(&locker, "memory"));
    let yardstick = app(&Stack::Minimal);
    println!("| workers | bare route µs/request | minimal lock layer adds | LockLayer adds |");
    println!("|---|---|---|---|");
    for workers in [1, 2] {
        // Interleaved, best of three each: the machine is shared.
        let (mut bare, mut least, mut locked) = (f64::MAX, f64::MAX, f64::MAX);
        for _ in 0..3 {
            bare = bare.min(per_request(&route, workers));
            least = least.min(per_request(&yardstick, workers));
            locked = locked.min(per_request(&layered, workers));
        }
        println!(
            "| {workers} | {bare:.2} | {:.2} | {:.2} |",
            least - bare,
            locked - bare
        );
    }
}
