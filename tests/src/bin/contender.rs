//! A lock client in its own OS process, for the multi-process tests.
//!
//! `contender <redis-url> <keys> <tasks> <millis> [kind]`: `tasks` tasks
//! contend on `keys` keys for `millis` ms. Inside each critical section a
//! task marks itself inside (`INCR inside:<k>` must return 1), does a
//! read-modify-write of `counter:<k>` with a pause in between (correct only
//! under mutual exclusion), and leaves. `kind` is the lock taken:
//! - none: the plain lock; `fair`: the fair lock, the same way;
//! - a number N: a semaphore of N permits: `INCR inside:<k>` must not pass
//!   N, and the counter is not kept;
//! - `rw`: one write in four, three reads: a writer counts as
//!   `inside:<k>` (must be 1, with no reader in `readers:<k>`) and keeps the
//!   counter; a reader must find no writer inside, and `most` is the most
//!   readers seen at once.
//!
//! Prints `ops=<n> violations=<n> most=<n>` (the most inside at once it
//! saw) at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::Locker;
use redis::AsyncCommands;
use tokio::time::Instant;

/// The lock each critical section takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Fair,
    Permits(u32),
    ReadWrite,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, keys, tasks, millis, kind) = match args.as_slice() {
        [_, url, keys, tasks, millis] => (url, keys, tasks, millis, Kind::Plain),
        [_, url, keys, tasks, millis, kind] => {
            let kind = match kind.as_str() {
                "fair" => Kind::Fair,
                "rw" => Kind::ReadWrite,
                permits => Kind::Permits(permits.parse().expect("fair, rw or permits")),
            };
            (url, keys, tasks, millis, kind)
        }
        _ => {
            eprintln!("usage: contender <redis-url> <keys> <tasks> <millis> [fair|rw|<permits>]");
            std::process::exit(2);
        }
    };
    let keys: u64 = keys.parse().expect("keys");
    let tasks: u64 = tasks.parse().expect("tasks");
    let until = Instant::now() + Duration::from_millis(millis.parse().expect("millis"));
    let locker = Locker::builder()
        .ttl(Duration::from_secs(5))
        .wait(Duration::from_secs(30))
        .redis(url)
        .await
        .expect("connect");
    let data = redis::Client::open(url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("data connection");
    let ops = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for task in 0..tasks {
        let (locker, mut data) = (locker.clone(), data.clone());
        let (ops, violations, most) = (ops.clone(), violations.clone(), most.clone());
        handles.push(tokio::spawn(async move {
            let mut round = task;
            while Instant::now() < until {
                round += 1;
                let k = round % keys;
                let key = format!("mp:{k}");
                let writes = kind == Kind::ReadWrite && round % 4 == 0;
                let guard = match kind {
                    Kind::Plain => locker.lock(key),
                    Kind::Fair => locker.fair_lock(key),
                    Kind::Permits(n) => locker.semaphore(key, n),
                    Kind::ReadWrite if writes => locker.write_lock(key),
                    Kind::ReadWrite => locker.read_lock(key),
                }
                .await
                .expect("acquire");
                if kind == Kind::ReadWrite && !writes {
                    let readers: u64 = data.incr(format!("readers:{k}"), 1).await.expect("INCR");
                    most.fetch_max(readers, Ordering::SeqCst);
                    let writers: Option<u64> = data.get(format!("inside:{k}")).await.expect("GET");
                    tokio::time::sleep(Duration::from_micros(300)).await;
                    if writers.unwrap_or(0) > 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    let _: i64 = data.decr(format!("readers:{k}"), 1).await.expect("DECR");
                    guard.release().await.expect("release");
                    ops.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                let inside: u64 = data.incr(format!("inside:{k}"), 1).await.expect("INCR");
                let bound = match kind {
                    Kind::Permits(n) => u64::from(n),
                    _ => 1,
                };
                if kind != Kind::ReadWrite {
                    most.fetch_max(inside, Ordering::SeqCst);
                }
                if inside > bound {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                if writes {
                    let readers: Option<u64> = data.get(format!("readers:{k}")).await.expect("GET");
                    if readers.unwrap_or(0) > 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if !matches!(kind, Kind::Permits(_)) {
                    let seen: i64 = data.get(format!("counter:{k}")).await.unwrap_or(0);
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let _: () = data
                        .set(format!("counter:{k}"), seen + 1)
                        .await
                        .expect("SET");
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let _: i64 = data.decr(format!("inside:{k}"), 1).await.expect("DECR");
                guard.release().await.expect("release");
                ops.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for handle in handles {
        handle.await.expect("task");
    }
    println!(
        "ops={} violations={} most={}",
        ops.load(Ordering::SeqCst),
        violations.load(Ordering::SeqCst),
        most.load(Ordering::SeqCst)
    );
}
