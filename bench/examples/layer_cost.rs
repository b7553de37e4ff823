//! What `LockLayer` costs per request beyond its lock, in CPU time of the
//! client and the store: an axum route called in process (no HTTP, no
//! sockets of its own), bare and behind the layer, against one `lock()` +
//! `release()` pair on the same store, with 1 and 16 tasks on distinct
//! keys, on the memory backend and on a Redis server of its own. The
//! client's CPU is this process's (its threads' schedstat), the store's the Redis
//! server's (`INFO cpu`); one worker thread, so the figures add up.
//!
//! `cargo run --release -p lock-bench --example layer_cost`
//!
//! Prints, per store and task count, µs per request (bare, layered) and per
//! pair, what the layer adds over the bare route, and that as a multiple of
//! the pair: 1.00 would be a layer whose only cost is its lock.

use axum::Router;
use axum::body::Body;
use http::Request;
use lock_core::Locker;
use lock_testkit::RedisServer;
use tower::ServiceExt;

use crate::stacks::{Stack, app};

/// The route and its stacks, shared with lock-bench's L workload (not
/// every item is used here).
#[allow(dead_code)]
#[path = "../src/stacks.rs"]
mod stacks;

/// What one operation of a run is.
#[derive(Clone, Copy)]
enum Work {
    /// A request to the route.
    Route,
    /// `lock()` + `release()`, no route.
    Pair,
}

/// A store the layer and the pair run on.
struct Store {
    name: &'static str,
    locker: Locker,
    /// The Redis server, whose CPU counts too.
    server: Option<RedisServer>,
    /// Operations per task at 1 and at 16 tasks.
    per_task: [u64; 2],
}

/// This process's CPU time, in µs: the sum of its threads' time on a CPU
/// (`/proc/self/task/*/schedstat`, in ns; `getrusage` would need unsafe
/// code, `/proc/self/stat` counts in 10 ms ticks).
fn own_cpu() -> f64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split(' ').next()?.parse::<u64>().ok())
        .sum();
    nanos as f64 / 1e3
}

/// The Redis server's user + system CPU time, in µs.
async fn server_cpu(server: &RedisServer) -> f64 {
    let mut conn = server.connection().await;
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn)
        .await
        .expect("INFO cpu");
    let seconds = |field: &str| -> f64 {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in INFO cpu"))
    };
    (seconds("used_cpu_user") + seconds("used_cpu_sys")) * 1e6
}

/// `per_task` operations of `work` in each of `tasks` tasks, on distinct
/// keys; returns client + store CPU µs per operation.
async fn run(store: &Store, app: &Router, work: Work, tasks: u64, per_task: u64) -> f64 {
    let store_before = match &store.server {
        Some(server) => server_cpu(server).await,
        None => 0.0,
    };
    let before = own_cpu();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let (app, locker) = (app.clone(), store.locker.clone());
            tokio::spawn(async move {
                for i in 0..per_task {
                    let id = task * 1_000_000 + i;
                    match work {
                        Work::Route => {
                            let request = Request::post(format!("/orders/{id}"))
                                .body(Body::empty())
                                .expect("request");
                            let response = app.clone().oneshot(request).await.expect("response");
                            let body = axum::body::to_bytes(response.into_body(), 64).await;
                            assert_eq!(&body.expect("body")[..], stacks::PAID.as_bytes());
                        }
                        Work::Pair => {
                            let guard = locker.lock(format!("order:{id}")).await.expect("lock");
                            guard.release().await.expect("release");
                        }
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    let client = own_cpu() - before;
    let server = match &store.server {
        Some(server) => server_cpu(server).await - store_before,
        None => 0.0,
    };
    (client + server) / (tasks * per_task) as f64
}

/// Operations per task at 1 and at 16 tasks, in process.
const IN_PROCESS: [u64; 2] = [200_000, 20_000];

/// The least CPU µs per operation of three interleaved runs of each of
/// `runs` (the machine is shared), after a warm-up of each.
async fn best_of_three(
    store: &Store,
    runs: &[(&Router, Work)],
    tasks: u64,
    per_task: u64,
) -> Vec<f64> {
    for (app, work) in runs {
        run(store, app, *work, tasks, per_task / 10).await;
    }
    let mut best = vec![f64::MAX; runs.len()];
    for _ in 0..3 {
        for ((app, work), best) in runs.iter().zip(&mut best) {
            *best = best.min(run(store, app, *work, tasks, per_task).await);
        }
    }
    best
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = RedisServer::start();
    let redis = Locker::redis(&server.url()).await.expect("connect");
    let stores = [
        Store {
            name: "memory",
            locker: Locker::memory(),
            server: None,
            per_task: IN_PROCESS,
        },
        Store {
            name: "redis",
            locker: redis,
            server: Some(server),
            per_task: [5_000, 1_000],
        },
    ];
    let (bare, noop, minimal) = (app(&Stack::Bare), app(&Stack::Noop), app(&Stack::Minimal));
    let mut bare_cost = [0.0; 2];
    println!("What a layer adds before any lock, µs per request:");
    println!();
    println!(
        "| tasks | bare route | a layer that does nothing adds | the minimal lock layer adds |"
    );
    println!("|---|---|---|---|");
    for (n, (tasks, per_task)) in [1, 16].into_iter().zip(IN_PROCESS).enumerate() {
        let runs = [
            (&bare, Work::Route),
            (&noop, Work::Route),
            (&minimal, Work::Route),
        ];
        let [b, n_, m] = best_of_three(&stores[0], &runs, tasks, per_task).await[..] else {
            unreachable!()
        };
        bare_cost[n] = b;
        println!("| {tasks} | {b:.2} | {:.2} | {:.2} |", n_ - b, m - b);
    }
    println!();
    println!("`LockLayer` against one lock() + release() pair, client + store CPU µs:");
    println!();
    println!("| store | tasks | LockLayer adds to the bare route | lock + release | adds / pair |");
    println!("|---|---|---|---|---|");
    for store in &stores {
        let layered = app(&Stack::Layered(&store.locker, store.name));
        for (n, (tasks, per_task)) in [1, 16].into_iter().zip(store.per_task).enumerate() {
            let runs = [(&layered, Work::Route), (&bare, Work::Pair)];
            let [l, p] = best_of_three(store, &runs, tasks, per_task).await[..] else {
                unreachable!()
            };
            let adds = l - bare_cost[n];
            println!(
                "| {} | {tasks} | {adds:.2} | {p:.2} | {:.2} |",
                store.name,
                adds / p
            );
        }
    }
}
