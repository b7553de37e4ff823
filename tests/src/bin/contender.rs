//! A lock client in its own OS process, for the multi-process tests.
//!
//! `contender <redis-url> <keys> <tasks> <millis> [permits]`: `tasks` tasks
//! contend on `keys` keys for `millis` ms. Inside each critical section a
//! task marks itself inside (`INCR inside:<k>` must return 1), does a
//! read-modify-write of `counter:<k>` with a pause in between (correct only
//! under mutual exclusion), and leaves. With `permits`, it takes a
//! semaphore of that many permits instead: `INCR inside:<k>` must not pass
//! `permits`, and the counter is not kept. Prints `ops=<n> violations=<n>
//! most=<n>` (the most inside at once it saw) at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::Locker;
use redis::AsyncCommands;
use tokio::time::Instant;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, keys, tasks, millis, permits) = match args.as_slice() {
        [_, url, keys, tasks, millis] => (url, keys, tasks, millis, None),
        [_, url, keys, tasks, millis, permits] => {
            let permits: u32 = permits.parse().expect("permits");
            (url, keys, tasks, millis, Some(permits))
        }
        _ => {
            eprintln!("usage: contender <redis-url> <keys> <tasks> <millis> [permits]");
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
                let guard = match permits {
                    Some(n) => locker.semaphore(key, n).await,
                    None => locker.lock(key).await,
                }
                .expect("acquire");
                let inside: u64 = data.incr(format!("inside:{k}"), 1).await.expect("INCR");
                most.fetch_max(inside, Ordering::SeqCst);
                if inside > u64::from(permits.unwrap_or(1)) {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                if permits.is_none() {
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
