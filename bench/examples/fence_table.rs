//! Resident memory of `FenceCheckLayer` after 1 000 000 distinct resources,
//! each sent once with a rising token (a caller naming a new resource per
//! request): bounded by `max_resources` (default 100 000) against a table
//! allowed to grow without bound, measured in the same run.
//!
//! `cargo run --release -p lock-bench --example fence_table`

use std::convert::Infallible;
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use lock_tower::fence_check::DEFAULT_MAX_RESOURCES;
use lock_tower::{FenceCheckLayer, KeyFrom, NewestTokens};
use tower::{Layer, ServiceExt};

const RESOURCES: u64 = 1_000_000;

/// Resident memory of this process, in MiB.
fn resident_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4.0 / 1024.0
}

/// Sends every resource once through a check of at most `max` resources:
/// the growth of resident memory (MiB), the table, and the seconds taken.
fn run(max: usize) -> (f64, NewestTokens, f64) {
    let check =
        FenceCheckLayer::new(KeyFrom::path("/accounts/{id}", "account:<id>")).max_resources(max);
    let newest = check.newest_tokens().clone();
    let service = check.layer(tower::service_fn(|_: Request<Empty<Bytes>>| async {
        Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let before = resident_mib();
    let started = Instant::now();
    for id in 0..RESOURCES {
        let request = Request::put(format!("/accounts/{id}"))
            .header("fencing-token", 1_000_000 + id)
            .body(Empty::new())
            .unwrap();
        let response = runtime.block_on(service.clone().oneshot(request)).unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let seconds = started.elapsed().as_secs_f64();
    (resident_mib() - before, newest, seconds)
}

fn main() {
    let (bounded, table, bounded_s) = run(DEFAULT_MAX_RESOURCES);
    let kept = table.len();
    drop(table);
    let (unbounded, table, unbounded_s) = run(usize::MAX);
    println!("{RESOURCES} distinct resources, one request each:");
    println!("| table | resources kept | resident memory growth | µs/request |");
    println!("|---|---|---|---|");
    println!(
        "| max_resources {DEFAULT_MAX_RESOURCES} (default) | {kept} | {bounded:.1} MiB | {:.2} |",
        bounded_s * 1e6 / RESOURCES as f64
    );
    println!(
        "| unbounded (reference) | {} | {unbounded:.1} MiB | {:.2} |",
        table.len(),
        unbounded_s * 1e6 / RESOURCES as f64
    );
    println!(
        "bounded/unbounded: memory {:.2}x, time {:.2}x",
        bounded / unbounded,
        bounded_s / unbounded_s
    );
}
