//! What keeping many locks alive costs: 10 000 locks held on one Locker,
//! each renewed by its watchdog every ttl/3, for a fixed window. Prints the
//! renewals the server ran (its `EVALSHA` calls), commands per second, and
//! CPU microseconds per renewal on the client and on the server (from
//! `/proc/<pid>/schedstat`, so a busy neighbour disturbs it far less than
//! wall-clock figures).
//!
//! `cargo run --release -p lock-bench --example watchdog_renewals`

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_testkit::{RedisServer, command_calls};

const LOCKS: usize = 10_000;
/// Renewed every second.
const TTL: Duration = Duration::from_secs(3);
const WINDOW: Duration = Duration::from_secs(12);
const RUNS: usize = 3;

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
    let server = RedisServer::start();
    let pid = server.pid().expect("server pid");
    let mut conn = server.connection().await;
    let locker = Locker::redis(&server.url()).await.expect("connect");
    let mut guards = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        guards.push(
            locker
                .lock(format!("held:{i}"))
                .ttl(TTL)
                .await
                .expect("lock"),
        );
    }
    // Every lease's first renewal has come due and its watchdog runs.
    tokio::time::sleep(TTL).await;
    println!(
        "| run | renewals | renewals/s | commands/s | client CPU µs/renewal | server CPU µs/renewal |"
    );
    println!("|---|---|---|---|---|---|");
    for run in 1..=RUNS {
        let (calls, client, served, started) = (
            command_calls(&mut conn, "evalsha").await,
            process_cpu_ns(),
            server_cpu_ns(pid),
            Instant::now(),
        );
        tokio::time::sleep(WINDOW).await;
        let renewals = command_calls(&mut conn, "evalsha").await - calls;
        let (client, served) = (process_cpu_ns() - client, server_cpu_ns(pid) - served);
        let seconds = started.elapsed().as_secs_f64();
        let per = |ns: u64| ns as f64 / 1000.0 / renewals as f64;
        println!(
            "| {run} | {renewals} | {:.0} | {:.0} | {:.2} | {:.2} |",
            renewals as f64 / seconds,
            (renewals + 2) as f64 / seconds,
            per(client),
            per(served),
        );
    }
    assert!(
        guards.iter().all(|guard| guard.is_held()),
        "a lease was lost"
    );
}
