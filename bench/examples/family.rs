//! The lock family against the plain lock, in one run on one Redis:
//!
//! - **S4**: a semaphore of 4 permits, 8 tasks, 1 ms of work while holding,
//!   against the plain lock on one key with the same tasks and work
//!   (target: about 4x);
//! - **K8**: the inventory workload, 16 tasks taking stock of one hot item,
//!   1 ms of work while holding: a striped lock of 8 segments against one
//!   plain key.
//!
//! Each row prints acquisitions per second and the lock commands the server
//! got per acquisition (`EVALSHA`, `SUBSCRIBE`, ... from `INFO
//! commandstats`).
//!
//! `cargo run --release -p lock-bench --example family`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lock_core::{LockError, LockGuard, Locker};
use lock_testkit::{RedisServer, lock_commands_sent};

const WINDOW: Duration = Duration::from_secs(3);
const WORK: Duration = Duration::from_millis(1);

/// How one task takes the lock of a workload.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Semaphore(u32),
    Striped(u32),
}

impl Kind {
    async fn take(self, locker: &Locker, key: &str) -> Result<LockGuard, LockError> {
        let wait = Duration::from_secs(30);
        match self {
            Kind::Plain => locker.lock(key).wait(wait).await,
            Kind::Semaphore(n) => locker.semaphore(key, n).wait(wait).await,
            Kind::Striped(k) => locker.striped(key, k).wait(wait).await,
        }
    }
}

/// Acquisitions per second and commands per acquisition of `tasks` tasks
/// taking `kind` on `key` for the window.
async fn run(server: &RedisServer, kind: Kind, key: &str, tasks: usize) -> (f64, f64) {
    let locker = Locker::redis(&server.url()).await.expect("connect");
    let mut conn = server.connection().await;
    let before = lock_commands_sent(&mut conn).await;
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (locker, done, key) = (locker.clone(), done.clone(), key.to_owned());
            tokio::spawn(async move {
                while started.elapsed() < WINDOW {
                    let guard = kind.take(&locker, &key).await.expect("acquire");
                    tokio::time::sleep(WORK).await;
                    guard.release().await.expect("release");
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    let seconds = started.elapsed().as_secs_f64();
    let acquisitions = done.load(Ordering::Relaxed) as f64;
    let commands = (lock_commands_sent(&mut conn).await - before) as f64;
    (acquisitions / seconds, commands / acquisitions)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RedisServer::start();
    println!("| workload | subject | acquisitions/s | × plain lock | commands per acquisition |");
    println!("|---|---|---|---|---|");
    let rows = [
        (
            "S4: 8 tasks, 1 ms held",
            8,
            Kind::Semaphore(4),
            "semaphore of 4",
        ),
        (
            "K8: 16 tasks, inventory, 1 ms held",
            16,
            Kind::Striped(8),
            "striped, 8 segments",
        ),
    ];
    for (n, (workload, tasks, kind, label)) in rows.into_iter().enumerate() {
        let (plain, plain_commands) = run(&server, Kind::Plain, &format!("plain:{n}"), tasks).await;
        let (family, commands) = run(&server, kind, &format!("family:{n}"), tasks).await;
        println!("| {workload} | plain lock, one key | {plain:.0} | 1.00 | {plain_commands:.2} |");
        println!(
            "| {workload} | {label} | {family:.0} | {:.2} | {commands:.2} |",
            family / plain
        );
    }
}
