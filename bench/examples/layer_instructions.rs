//! What the lock path costs in process, counted in instructions by
//! callgrind (a count repeats on a noisy machine where seconds do not):
//! - an axum route called in process, bare, behind a layer that does
//!   nothing (what axum's `Router::layer` costs by itself) and behind
//!   `LockLayer` on the memory backend (16 tasks, distinct keys, one worker
//!   thread);
//! - lock-core alone: `lock(key).await` and dropping the guard, memory
//!   backend, distinct keys;
//! - a yardstick, not a lock library: the minimal lock layer
//!   (`bench/src/minimal_layer.rs`), the least a lock layer with
//!   `LockLayer`'s API can do (a key from the path, a mutex-guarded set of
//!   held keys, a token and a handle in the request extensions, the key
//!   given back when the response is ready) and nothing else (no lease,
//!   expiry, waiting line, owner or telemetry).
//!
//! Each workload runs under callgrind twice, with 500 and 1500 operations
//! per task; the difference divided by the extra operations is the cost of
//! one operation, without start-up and runtime set-up.
//!
//! `cargo run --release -p lock-bench --example layer_instructions`
//!
//! Needs valgrind (`apt-get install -y valgrind`); takes about a minute.

use std::process::Command;

use axum::body::Body;
use http::Request;
use lock_core::Locker;
use tower::ServiceExt;

use crate::stacks::Stack;

const TASKS: u64 = 16;
const FEW: u64 = 500;
const MANY: u64 = 1500;

/// The workloads, with what one operation is.
const WORKLOADS: [(&str, &str); 5] = [
    ("bare", "request to the bare route"),
    (
        "noop",
        "request behind a layer that does nothing (axum's share)",
    ),
    ("layered", "request behind LockLayer (memory)"),
    (
        "minimal",
        "request behind the minimal lock layer (a yardstick)",
    ),
    ("core", "lock + release, lock-core memory"),
];

/// Runs `workload` with `per_task` operations in each of the tasks.
fn run(workload: &str, per_task: u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let locker = Locker::memory();
    let stack = match workload {
        "bare" => Some(Stack::Bare),
        "noop" => Some(Stack::Noop),
        "layered" => Some(Stack::Layered(&locker, "memory")),
        "minimal" => Some(Stack::Minimal),
        _ => None,
    };
    let app = stack.as_ref().map(stacks::app);
    runtime.block_on(async {
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (app, locker) = (app.clone(), locker.clone());
                tokio::spawn(async move {
                    for i in 0..per_task {
                        let id = task * 1_000_000 + i;
                        match &app {
                            Some(app) => {
                                let request = Request::post(format!("/orders/{id}"))
                                    .body(Body::empty())
                                    .expect("request");
                                let response =
                                    app.clone().oneshot(request).await.expect("response");
                                let body = axum::body::to_bytes(response.into_body(), 64).await;
                                assert_eq!(&body.expect("body")[..], stacks::PAID.as_bytes());
                            }
                            None => drop(locker.lock(format!("order:{id}")).await.expect("lock")),
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    });
}

/// The route and its stacks, shared with lock-bench's L workload (not
/// every item is used here).
#[allow(dead_code)]
#[path = "../src/stacks.rs"]
mod stacks;

/// Instructions of this program running `workload` under callgrind.
fn counted(workload: &str, per_task: u64) -> u64 {
    let out = std::env::temp_dir().join(format!(
        "layer_instructions.{}.{workload}.{per_task}",
        std::process::id()
    ));
    let exe = std::env::current_exe().expect("own executable");
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["--run", workload, &per_task.to_string()])
        .output()
        .unwrap_or_else(|err| {
            panic!("valgrind did not start ({err}): install it with `apt-get install -y valgrind`")
        });
    assert!(
        status.status.success(),
        "callgrind run of {workload} failed"
    );
    let text = std::fs::read_to_string(&out).expect("callgrind output");
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|line| line.strip_prefix("summary: "))
        .and_then(|n| n.trim().parse().ok())
        .expect("callgrind summary line")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, workload, per_task] = args.as_slice()
        && flag == "--run"
    {
        run(workload, per_task.parse().expect("operations per task"));
        return;
    }
    println!("| workload | instructions per operation |");
    println!("|---|---|");
    for (workload, label) in WORKLOADS {
        let extra = counted(workload, MANY) - counted(workload, FEW);
        let per_op = extra as f64 / (TASKS * (MANY - FEW)) as f64;
        println!("| {label} | {per_op:.0} |");
    }
}
