//! Benchmarks of lock-core, as a program (not a timed test).
//!
//! ```text
//! cargo run --release -p lock-bench -- [rounds]
//! ```
//!
//! Starts its own redis-server (or uses `REDIS_URL`) and measures, in the
//! same run and interleaved round by round (one-client round trips on a
//! shared machine swing from minute to minute):
//! - the reference: one `SET` and one `EVALSHA` of a lock-sized script back
//!   to back on one multiplexed connection, the "pair limit" (a lock and a
//!   release are two script calls);
//! - lock-core on Redis and on the memory backend, on the workloads
//!   U1 (one task, distinct keys), U16 (16 tasks, distinct keys, one
//!   Locker), C8 (8 tasks on one key, a shared counter, 1 ms of work outside
//!   the lock) and W1000 (1000 tasks on one key).
//!
//! It prints a Markdown table: ops/s, latency percentiles, the ratio to the
//! pair limit of the same round (median over rounds), and for contention
//! the wait percentiles, the per-task spread, the share of re-acquisitions
//! by the task that just released, and Redis commands per acquisition.

mod stats;
mod workloads;

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::RedisServer;

use crate::stats::Row;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    };
    let redis = Locker::builder()
        .ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(60))
        .redis(&url)
        .await
        .expect("connect");
    let memory = Locker::builder()
        .ttl(Duration::from_secs(10))
        .wait(Duration::from_secs(60))
        .memory()
        .expect("memory");
    let client = redis::Client::open(url.as_str()).expect("url");
    let mut rows: Vec<Row> = Vec::new();
    for round in 0..rounds {
        let reference = workloads::pair_limit(&client, 2000).await;
        eprintln!(
            "round {}: pair limit {:.0}/s",
            round + 1,
            reference.ops_per_sec
        );
        let mut measured = vec![reference.clone()];
        measured.push(workloads::u1(&redis, "redis", 2000).await);
        measured.push(workloads::u16(&redis, "redis", 4000).await);
        measured.push(workloads::c8(&redis, "redis", &client, 400).await);
        measured.push(workloads::w1000(&redis, "redis", &client).await);
        measured.push(workloads::u1(&memory, "memory", 20_000).await);
        measured.push(workloads::u16(&memory, "memory", 40_000).await);
        measured.push(workloads::c8(&memory, "memory", &client, 400).await);
        measured.push(workloads::w1000(&memory, "memory", &client).await);
        for mut row in measured {
            row.ratios.push(row.ops_per_sec / reference.ops_per_sec);
            match rows.iter_mut().find(|r| r.name == row.name) {
                Some(existing) => existing.merge(row),
                None => rows.push(row),
            }
        }
    }
    println!("{}", stats::table(&rows, rounds));
}
