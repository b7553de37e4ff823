//! U1, C8 and W1000 for the examples that compare stores or locks
//! (included with `#[path]`): U1 is one task locking and releasing distinct
//! keys for `WINDOW`; C8 is 8 tasks on one key for `WINDOW`, 1 ms of work
//! outside the lock; W1000 is 1000 tasks on one key, once each. Each runs
//! over any [`Lock`], so that a reference is driven exactly as lock-core is.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::{LockGuard, Locker};

pub const WINDOW: Duration = Duration::from_secs(2);

/// A lock a workload drives: waits until it holds `key`, then gives it back.
pub trait Lock: Clone + Send + Sync + 'static {
    type Held: Send;
    fn acquire(&self, key: String) -> impl Future<Output = Self::Held> + Send;
    fn release(&self, held: Self::Held) -> impl Future<Output = ()> + Send;
}

impl Lock for Locker {
    type Held = LockGuard;

    async fn acquire(&self, key: String) -> LockGuard {
        self.lock(key).await.expect("acquire")
    }

    async fn release(&self, held: LockGuard) {
        held.release().await.expect("release");
    }
}

/// What one workload did: acquisitions, each one's wait, and (acquired,
/// released) instants.
pub struct Run {
    pub done: u64,
    pub waits: Vec<Duration>,
    pub spans: Vec<(Instant, Instant)>,
}

/// U1 on keys `u1:<round>:<n>`.
pub async fn u1(lock: &impl Lock, round: usize) -> Run {
    let started = Instant::now();
    let mut waits = Vec::new();
    while started.elapsed() < WINDOW {
        let key = format!("u1:{round}:{}", waits.len());
        let sent = Instant::now();
        let held = lock.acquire(key).await;
        waits.push(sent.elapsed());
        lock.release(held).await;
    }
    Run {
        done: waits.len() as u64,
        waits,
        spans: Vec::new(),
    }
}

/// C8 (`tasks` 8, for `WINDOW`, 1 ms outside) or W1000 (`tasks` 1000,
/// `once`) on `key`.
pub async fn contend<L: Lock>(lock: &L, key: String, tasks: usize, once: bool) -> Run {
    let started = Instant::now();
    let record = Arc::new(Mutex::new((Vec::new(), Vec::new())));
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (lock, key, record) = (lock.clone(), key.clone(), record.clone());
            tokio::spawn(async move {
                loop {
                    let sent = Instant::now();
                    let held = lock.acquire(key.clone()).await;
                    let acquired = Instant::now();
                    lock.release(held).await;
                    let released = Instant::now();
                    {
                        let mut record = record.lock().unwrap();
                        record.0.push(acquired - sent);
                        record.1.push((acquired, released));
                    }
                    if once || started.elapsed() >= WINDOW {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.expect("worker");
    }
    let (waits, spans) = std::mem::take(&mut *record.lock().unwrap());
    Run {
        done: waits.len() as u64,
        waits,
        spans,
    }
}

/// Runs `workload` (`U1`, `C8` or `W1000`) in `round`.
pub async fn run(lock: &impl Lock, workload: &str, round: usize) -> Run {
    match workload {
        "U1" => u1(lock, round).await,
        "C8" => contend(lock, format!("c8:{round}"), 8, false).await,
        _ => contend(lock, format!("w1000:{round}"), 1000, true).await,
    }
}

/// From each release to the next acquisition, in acquisition order.
pub fn handoffs(mut spans: Vec<(Instant, Instant)>) -> Vec<Duration> {
    spans.sort_by_key(|(acquired, _)| *acquired);
    spans
        .windows(2)
        .map(|pair| pair[1].0.saturating_duration_since(pair[0].1))
        .collect()
}

/// The median of `times`, in µs.
pub fn p50(times: &mut [Duration]) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e6
}

/// The median of `values`.
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
