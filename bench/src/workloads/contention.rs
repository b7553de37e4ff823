//! C8 and W1000: many tasks on one key; and the state memory of waiting
//! and holding.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::CommandCount;
use super::board::{Board, BoardFile, now_ns};
use crate::memory::{self, StateMemory};
use crate::stats::{Percentiles, Row};
use crate::subject::Subject;

/// The key every contention workload fights over.
pub const CONTENDED_KEY: &str = "c8";
/// Work done outside the lock between acquisitions.
const OUTSIDE_WORK: Duration = Duration::from_millis(1);
/// How long tasks keep taking the lock.
pub const RUN_FOR: Duration = Duration::from_secs(1);

/// What the tasks of one process saw; merged across processes.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Tally {
    pub per_task: Vec<u64>,
    pub wait_us: Vec<f64>,
    pub release_us: Vec<f64>,
    pub handoff_us: Vec<f64>,
    pub reacquired: u64,
}

impl Tally {
    pub fn merge(&mut self, other: Tally) {
        self.per_task.extend(other.per_task);
        self.wait_us.extend(other.wait_us);
        self.release_us.extend(other.release_us);
        self.handoff_us.extend(other.handoff_us);
        self.reacquired += other.reacquired;
    }

    pub fn acquisitions(&self) -> u64 {
        self.per_task.iter().sum()
    }

    /// The row; `board` must show one increment per acquisition.
    pub fn row(self, workload: &str, subject: &Subject, board: &Board, elapsed: Duration) -> Row {
        let acquisitions = self.acquisitions();
        assert_eq!(
            board.count(),
            acquisitions,
            "{workload} {}: lost updates, mutual exclusion broken",
            subject.label()
        );
        let micros = |v: &[f64]| -> Vec<Duration> {
            v.iter()
                .map(|us| Duration::from_secs_f64(us / 1e6))
                .collect()
        };
        let min = self.per_task.iter().min().copied().unwrap_or(0);
        let max = self.per_task.iter().max().copied().unwrap_or(1).max(1);
        let wait = Percentiles::of(&mut micros(&self.wait_us));
        Row {
            ops_per_sec: acquisitions as f64 / elapsed.as_secs_f64(),
            acquisitions,
            acquire: wait.clone(),
            release: Some(Percentiles::of(&mut micros(&self.release_us))),
            wait: Some(wait),
            spread: Some(min as f64 / max as f64),
            reacquired: Some(self.reacquired as f64 / acquisitions.max(1) as f64),
            handoff: Some(Percentiles::of(&mut micros(&self.handoff_us))),
            ..Row::new(workload, subject.label())
        }
    }
}

/// `tasks` tasks (numbered from `first_task`, 1-based) take the contended
/// key until `run_for` has passed: lock, increment the board's counter,
/// release, then `OUTSIDE_WORK`. Acquisitions in progress at the end are
/// finished and counted.
pub async fn contend(
    subject: &Subject,
    board: &Arc<Board>,
    first_task: u64,
    tasks: usize,
    run_for: Duration,
) -> Tally {
    let end = Instant::now() + run_for;
    let handles: Vec<_> = (0..tasks as u64)
        .map(|i| {
            let (subject, board) = (subject.clone(), Arc::clone(board));
            let me = first_task + i;
            tokio::spawn(async move {
                let mut tally = Tally {
                    per_task: vec![0],
                    ..Tally::default()
                };
                while Instant::now() < end {
                    let t0 = now_ns();
                    let held = subject.lock(CONTENDED_KEY).await;
                    let t1 = now_ns();
                    tally.wait_us.push((t1 - t0) as f64 / 1e3);
                    let (last_task, last_at) = board.last_release();
                    if last_task == me {
                        tally.reacquired += 1;
                    } else if last_task != 0 && (t0..=t1).contains(&last_at) {
                        tally.handoff_us.push((t1 - last_at) as f64 / 1e3);
                    }
                    board.increment();
                    tally.per_task[0] += 1;
                    board.releasing(me);
                    let t2 = now_ns();
                    held.release().await;
                    let t3 = now_ns();
                    board.released_at(t3);
                    tally.release_us.push((t3 - t2) as f64 / 1e3);
                    tokio::time::sleep(OUTSIDE_WORK).await;
                }
                tally
            })
        })
        .collect();
    let mut tally = Tally::default();
    for handle in handles {
        tally.merge(handle.await.expect("contending task"));
    }
    tally
}

/// C8: 8 tasks of this process on one key.
pub async fn c8(subject: &Subject, client: &redis::Client) -> Row {
    let file = BoardFile::create();
    let board = Arc::new(file.open());
    let count = CommandCount::start(client, subject).await;
    let started = Instant::now();
    let tally = contend(subject, &board, 1, 8, RUN_FOR).await;
    let elapsed = started.elapsed();
    let acquisitions = tally.acquisitions();
    let mut row = tally.row("C8", subject, &board, elapsed);
    row.commands = super::per_acquisition(count, acquisitions).await;
    row
}

/// W1000: 1000 tasks of one process on one key, each once.
pub async fn w1000(subject: &Subject, client: &redis::Client) -> Row {
    const TASKS: usize = 1000;
    let count = CommandCount::start(client, subject).await;
    let started = Instant::now();
    let handles: Vec<_> = (0..TASKS)
        .map(|_| {
            let subject = subject.clone();
            tokio::spawn(async move {
                let t0 = Instant::now();
                let held = subject.lock("w1000").await;
                let t1 = Instant::now();
                held.release().await;
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
    let commands = super::per_acquisition(count, TASKS as u64).await;
    let wait = Percentiles::of(&mut wait);
    Row {
        ops_per_sec: TASKS as f64 / elapsed.as_secs_f64(),
        acquisitions: TASKS as u64,
        acquire: wait.clone(),
        release: Some(Percentiles::of(&mut release)),
        wait: Some(wait),
        commands,
        ..Row::new("W1000", subject.label())
    }
}

/// Redis `used_memory`.
async fn redis_used_memory(client: &redis::Client) -> isize {
    super::info_field(client, "memory", "used_memory")
        .await
        .and_then(|v| v.parse().ok())
        .expect("used_memory in INFO")
}

/// Client heap per waiting task and per held lock, and Redis memory per
/// held lock, over 1000 of each.
pub async fn state_memory(subject: &Subject, client: &redis::Client) -> StateMemory {
    const N: usize = 1000;
    let _counting = memory::Window::open();
    // Held locks on distinct keys.
    let (heap, redis) = (memory::live_bytes(), redis_used_memory(client).await);
    // The guards' own bytes are in the vector, so they count too.
    let mut held = Vec::with_capacity(N);
    for i in 0..N {
        held.push(subject.lock(&format!("mem:held:{i}")).await);
    }
    let per_held = (memory::live_bytes() - heap) as f64 / N as f64;
    let redis_per_held = subject
        .on_redis()
        .then_some((redis_used_memory(client).await - redis) as f64 / N as f64);
    for h in held {
        h.release().await;
    }

    // Waiters on one held key.
    let holder = subject.lock("mem:wait").await;
    let heap = memory::live_bytes();
    let waiters: Vec<_> = (0..N)
        .map(|_| {
            let subject = subject.clone();
            tokio::spawn(async move { subject.lock("mem:wait").await.release().await })
        })
        .collect();
    let waiting_known_by = match subject.locker() {
        Some(locker) => {
            while locker.local_waiters("mem:wait") < N {
                tokio::task::yield_now().await;
            }
            "all 1000 in the local line"
        }
        None => {
            // rslock keeps no count of its waiters: let every one start polling.
            tokio::time::sleep(Duration::from_millis(500)).await;
            "after 500 ms of polling"
        }
    };
    let per_waiter = (memory::live_bytes() - heap) as f64 / N as f64;
    holder.release().await;
    for waiter in waiters {
        waiter.await.expect("waiter");
    }
    StateMemory {
        subject: subject.label().to_owned(),
        per_waiter,
        per_held,
        redis_per_held,
        waiting_known_by,
    }
}
