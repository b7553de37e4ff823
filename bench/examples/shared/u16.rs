//! U16 for the examples: 16 tasks taking and releasing locks on distinct
//! keys through one Locker for a 3 s window (included with `#[path]`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use lock_core::Locker;

const WINDOW: Duration = Duration::from_secs(3);
const TASKS: usize = 16;

/// Acquisitions (each released) of `TASKS` tasks on `locker` in `WINDOW`.
pub async fn u16(locker: &Locker, label: &str) -> (u64, f64) {
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
    let done = done.load(Ordering::Relaxed);
    (done, done as f64 / started.elapsed().as_secs_f64())
}
