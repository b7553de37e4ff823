//! What replica acknowledgement costs: U16 (16 tasks taking and releasing
//! locks on distinct keys through one Locker) on a master with one live
//! replica, without and with `replicas(1, 1 s)`, in one run. Each
//! confirmed acquisition renews its lease and sends `WAIT` on a connection
//! of its own.
//!
//! `cargo run --release -p lock-bench --example replica_confirmation`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_testkit::RedisServer;

const WINDOW: Duration = Duration::from_secs(3);
const TASKS: usize = 16;

/// Acquisitions (each released) per second of `TASKS` tasks on `locker`.
async fn u16(locker: &Locker, label: &str) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, done, label) = (locker.clone(), done.clone(), label.to_owned());
            tokio::spawn(async move {
                let mut n = 0u64;
                while started.elapsed() < WINDOW {
                    let key = format!("{label}:{task}:{n}");
                    let guard = locker.lock(key).await.expect("acquire");
                    guard.release().await.expect("release");
                    n += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let master = RedisServer::start();
    let _replica = master.start_replica().await;
    let plain = Locker::redis(&master.url()).await.expect("connect");
    let confirmed = Locker::builder()
        .replicas(1, Duration::from_secs(1))
        .redis(&master.url())
        .await
        .expect("connect");
    println!("| U16, master + 1 replica | acquisitions/s | × without |");
    println!("|---|---|---|");
    for round in 0..2 {
        let without = u16(&plain, &format!("plain{round}")).await;
        let with = u16(&confirmed, &format!("acked{round}")).await;
        println!("| without replicas() | {without:.0} | 1.00 |");
        println!("| replicas(1, 1 s) | {with:.0} | {:.2} |", with / without);
    }
}
