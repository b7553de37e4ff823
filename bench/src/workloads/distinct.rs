//! U1 and U16: lock and release on distinct keys, no contention.

use tokio::time::Instant;

use super::CommandCount;
use crate::stats::{Percentiles, Row};
use crate::subject::Subject;

/// Lock + release on distinct keys from `tasks` tasks sharing `subject`,
/// whose store (if Redis) `client` reaches.
async fn distinct(
    workload: &str,
    subject: &Subject,
    client: &redis::Client,
    tasks: usize,
    ops: usize,
) -> Row {
    let count = CommandCount::start(client, subject).await;
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let subject = subject.clone();
            tokio::spawn(async move {
                let (mut acquire, mut release) = (Vec::new(), Vec::new());
                for i in 0..ops / tasks {
                    let t0 = Instant::now();
                    let held = subject.lock(&format!("u:{task}:{i}")).await;
                    let t1 = Instant::now();
                    held.release().await;
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
    let ops_per_sec = acquire.len() as f64 / started.elapsed().as_secs_f64();
    let acquisitions = acquire.len() as u64;
    Row {
        ops_per_sec,
        acquisitions,
        commands: super::per_acquisition(count, acquisitions).await,
        acquire: Percentiles::of(&mut acquire),
        release: Some(Percentiles::of(&mut release)),
        ..Row::new(workload, subject.label())
    }
}

/// Operations per run: about a quarter of a second on Redis.
fn ops(subject: &Subject, on_redis: usize) -> usize {
    if subject.on_redis() {
        on_redis
    } else {
        on_redis * 10
    }
}

/// U1: one task, lock + release on distinct keys.
pub async fn u1(subject: &Subject, client: &redis::Client) -> Row {
    distinct("U1", subject, client, 1, ops(subject, 2000)).await
}

/// U16: 16 tasks on distinct keys sharing one subject (one Locker, one
/// rslock manager).
pub async fn u16(subject: &Subject, client: &redis::Client) -> Row {
    distinct("U16", subject, client, 16, ops(subject, 4000)).await
}
