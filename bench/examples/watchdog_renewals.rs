//! What keeping many locks alive costs (H10k): 10 000 locks held on one
//! Locker, each renewed by its watchdog every ttl/3, for a fixed window.
//! Prints the lease renewals per second (10 000 per ttl/3: every lease was
//! still held at the end), the script calls the server ran for them
//! (`EVALSHA`; renewals due on one tick share calls), and CPU per second and
//! per renewal on the client and on the server (from `/proc/<pid>/schedstat`,
//! so a busy neighbour disturbs it far less than wall-clock figures).
//!
//! `cargo run --release -p lock-bench --example watchdog_renewals [ttl-seconds]`
//! (default 30 s, the H10k workload; 3 s renews ten times as often).

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_testkit::{RedisServer, command_calls};

const LOCKS: usize = 10_000;
/// Windows measured, each two renewal intervals long.
const RUNS: usize = 2;

/// CPU nanoseconds the (single-threaded) server `pid` has used so far.
fn server_cpu_ns(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    stat.split_whitespace()
        .next()
        .and_then(|ns| ns.parse().ok())
        .expect("a CPU time")
}

/// CPU nanoseconds of every thread of this process (`/proc/self/schedstat`
/// counts only the calling thread).
fn process_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .filter_map(|task| {
            let path = task.ok()?.path().join("schedstat");
            let stat = std::fs::read_to_string(path).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let ttl_seconds: u64 = std::env::args()
        .nth(1)
        .map_or(30, |s| s.parse().expect("ttl in seconds"));
    let ttl = Duration::from_secs(ttl_seconds);
    let window = ttl * 2 / 3;
    let server = RedisServer::start();
    let pid = server.pid().expect("server pid");
    let mut conn = server.connection().await;
    let locker = Locker::redis(&server.url()).await.expect("connect");
    let mut guards = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        guards.push(
            locker
                .lock(format!("held:{i}"))
                .ttl(ttl)
                .await
                .expect("lock"),
        );
    }
    // Every lease's first renewal has come due and its watchdog runs.
    tokio::time::sleep(ttl / 2).await;
    println!("{LOCKS} locks held, ttl {ttl:?}, windows of {window:?}:");
    println!();
    println!(
        "| run | lease renewals/s | script calls/s | client CPU ms/s | server CPU ms/s | client CPU µs/renewal | server CPU µs/renewal |"
    );
    println!("|---|---|---|---|---|---|---|");
    for run in 1..=RUNS {
        let (calls, client, served, started) = (
            command_calls(&mut conn, "evalsha").await,
            process_cpu_ns(),
            server_cpu_ns(pid),
            Instant::now(),
        );
        tokio::time::sleep(window).await;
        let calls = command_calls(&mut conn, "evalsha").await - calls;
        let (client, served) = (process_cpu_ns() - client, server_cpu_ns(pid) - served);
        let seconds = started.elapsed().as_secs_f64();
        let renewals = LOCKS as f64 * 3.0 / ttl.as_secs_f64();
        let per_second = |ns: u64| ns as f64 / 1e6 / seconds;
        let per_renewal = |ns: u64| ns as f64 / 1000.0 / (renewals * seconds);
        println!(
            "| {run} | {renewals:.0} | {:.1} | {:.1} | {:.1} | {:.2} | {:.2} |",
            calls as f64 / seconds,
            per_second(client),
            per_second(served),
            per_renewal(client),
            per_renewal(served),
        );
    }
    assert!(
        guards.iter().all(|guard| guard.is_held()),
        "a lease was lost"
    );
}
