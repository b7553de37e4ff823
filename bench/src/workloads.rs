//! The workloads. Each returns one [`Row`] for one round.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use lock_core::Locker;
use tokio::time::Instant;

use crate::stats::{Percentiles, Row};

/// Commands sent to Redis by lock clients so far (`None` off Redis).
async fn sent_commands(client: &redis::Client, backend: &str) -> Option<u64> {
    if backend != "redis" {
        return None;
    }
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("admin");
    Some(lock_testkit::lock_commands_sent(&mut conn).await)
}

/// Commands per acquisition since `before`.
async fn per_acquisition(
    client: &redis::Client,
    backend: &str,
    before: Option<u64>,
    acquisitions: u64,
) -> Option<f64> {
    let after = sent_commands(client, backend).await?;
    Some((after - before?) as f64 / acquisitions.max(1) as f64)
}

/// The reference: SET + EVALSHA of a lock-sized script, back to back.
pub async fn pair_limit(client: &redis::Client, pairs: usize) -> Row {
    let script = redis::Script::new(
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0",
    );
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let (mut set, mut eval) = (Vec::with_capacity(pairs), Vec::with_capacity(pairs));
    let started = Instant::now();
    for i in 0..pairs {
        let t0 = Instant::now();
        let _: () = redis::cmd("SET")
            .arg("ref:set")
            .arg(i)
            .query_async(&mut conn)
            .await
            .expect("SET");
        let t1 = Instant::now();
        let _: i64 = script
            .key(format!("ref:{}", i % 64))
            .arg("owner")
            .arg(1)
            .invoke_async(&mut conn)
            .await
            .expect("EVALSHA");
        eval.push(t1.elapsed());
        set.push(t1 - t0);
    }
    Row {
        name: "reference: SET + EVALSHA pair (pair limit)".into(),
        ops_per_sec: pairs as f64 / started.elapsed().as_secs_f64(),
        acquire: Percentiles::of(&mut eval),
        release: Percentiles::of(&mut set),
        ..Row::default()
    }
}

/// Lock and release on distinct keys from `tasks` tasks sharing `locker`.
async fn distinct(locker: &Locker, name: String, tasks: usize, ops: usize) -> Row {
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let (mut acquire, mut release) = (Vec::new(), Vec::new());
                for i in 0..ops / tasks {
                    let t0 = Instant::now();
                    let guard = locker.lock(format!("u:{task}:{i}")).await.expect("lock");
                    let t1 = Instant::now();
                    guard.release().await.expect("release");
                    acquire.push(t1 - t0);
                    release.push(t1.elapsed());
                }
                (acquire, release)
            })
        })
        .collect();
    let (mut acquire, mut release) = (Vec::new(), Vec::new());
    for handle in handles {
        let (a, r) = handle.await.expect("task");
        acquire.extend(a);
        release.extend(r);
    }
    Row {
        name,
        ops_per_sec: acquire.len() as f64 / started.elapsed().as_secs_f64(),
        acquire: Percentiles::of(&mut acquire),
        release: Percentiles::of(&mut release),
        ..Row::default()
    }
}

/// U1: one task, lock + release on distinct keys.
pub async fn u1(locker: &Locker, backend: &str, ops: usize) -> Row {
    distinct(locker, format!("U1 {backend}"), 1, ops).await
}

/// U16: 16 tasks on distinct keys, one Locker.
pub async fn u16(locker: &Locker, backend: &str, ops: usize) -> Row {
    distinct(locker, format!("U16 {backend}"), 16, ops).await
}

/// Who released last and when.
struct LastRelease {
    task: usize,
    at: Instant,
}

/// C8: 8 tasks on one key; in the lock a shared-counter increment, outside
/// 1 ms of work.
pub async fn c8(locker: &Locker, backend: &str, client: &redis::Client, total: u64) -> Row {
    const TASKS: usize = 8;
    let counter = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let last = Arc::new(Mutex::new(None::<LastRelease>));
    let reacquired = Arc::new(AtomicUsize::new(0));
    let handoffs = Arc::new(Mutex::new(Vec::new()));
    let before = sent_commands(client, backend).await;
    let started = Instant::now();
    let handles: Vec<_> = (0..TASKS)
        .map(|task| {
            let locker = locker.clone();
            let (counter, done, last) = (counter.clone(), done.clone(), last.clone());
            let (reacquired, handoffs) = (reacquired.clone(), handoffs.clone());
            tokio::spawn(async move {
                let (mut wait, mut release, mut mine) = (Vec::new(), Vec::new(), 0u64);
                while done.fetch_add(1, Ordering::SeqCst) < total {
                    let t0 = Instant::now();
                    let guard = locker.lock("c8").await.expect("lock");
                    let t1 = Instant::now();
                    wait.push(t1 - t0);
                    if let Some(previous) = last.lock().expect("poisoned").as_ref() {
                        if previous.task == task {
                            reacquired.fetch_add(1, Ordering::SeqCst);
                        } else if previous.at >= t0 {
                            handoffs.lock().expect("poisoned").push(t1 - previous.at);
                        }
                    }
                    // Correct only under mutual exclusion.
                    let seen = counter.load(Ordering::SeqCst);
                    counter.store(seen + 1, Ordering::SeqCst);
                    mine += 1;
                    let t2 = Instant::now();
                    guard.release().await.expect("release");
                    let t3 = Instant::now();
                    *last.lock().expect("poisoned") = Some(LastRelease { task, at: t3 });
                    release.push(t3 - t2);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                (wait, release, mine)
            })
        })
        .collect();
    let (mut wait, mut release, mut per_task) = (Vec::new(), Vec::new(), Vec::new());
    for handle in handles {
        let (w, r, mine) = handle.await.expect("task");
        wait.extend(w);
        release.extend(r);
        per_task.push(mine);
    }
    let elapsed = started.elapsed();
    let acquisitions = counter.load(Ordering::SeqCst);
    assert_eq!(
        acquisitions,
        wait.len() as u64,
        "lost updates: mutual exclusion broken"
    );
    let commands = per_acquisition(client, backend, before, acquisitions).await;
    let spread = *per_task.iter().min().unwrap_or(&0) as f64
        / (*per_task.iter().max().unwrap_or(&1)).max(1) as f64;
    let mut handoffs = std::mem::take(&mut *handoffs.lock().expect("poisoned"));
    Row {
        name: format!("C8 {backend}"),
        ops_per_sec: acquisitions as f64 / elapsed.as_secs_f64(),
        acquire: Percentiles::of(&mut wait.clone()),
        release: Percentiles::of(&mut release),
        wait: Some(Percentiles::of(&mut wait)),
        spread: Some(spread),
        reacquired: Some(reacquired.load(Ordering::SeqCst) as f64 / acquisitions as f64),
        handoff: Some(Percentiles::of(&mut handoffs)),
        commands,
        ..Row::default()
    }
}

/// W1000: 1000 tasks of one process on one key, each once.
pub async fn w1000(locker: &Locker, backend: &str, client: &redis::Client) -> Row {
    const TASKS: usize = 1000;
    let before = sent_commands(client, backend).await;
    let started = Instant::now();
    let handles: Vec<_> = (0..TASKS)
        .map(|_| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let guard = locker.lock("w1000").await.expect("lock");
                let t1 = Instant::now();
                guard.release().await.expect("release");
                (t1 - t0, t1.elapsed())
            })
        })
        .collect();
    let (mut wait, mut release) = (Vec::new(), Vec::new());
    for handle in handles {
        let (w, r) = handle.await.expect("task");
        wait.push(w);
        release.push(r);
    }
    let elapsed = started.elapsed();
    let commands = per_acquisition(client, backend, before, TASKS as u64).await;
    Row {
        name: format!("W1000 {backend}"),
        ops_per_sec: TASKS as f64 / elapsed.as_secs_f64(),
        acquire: Percentiles::of(&mut wait.clone()),
        release: Percentiles::of(&mut release),
        wait: Some(Percentiles::of(&mut wait)),
        commands,
        ..Row::default()
    }
}
