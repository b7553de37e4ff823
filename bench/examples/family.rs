//! The lock family against the plain lock, in one run on one Redis:
//!
//! - **S4**: a semaphore of 4 permits, 8 tasks, 1 ms of work while holding,
//!   against the plain lock on one key with the same tasks and work
//!   (target: about 4x);
//! - **K8**: the inventory workload, 16 tasks taking stock of one hot item,
//!   1 ms of work while holding: a striped lock of 8 segments against one
//!   plain key;
//! - **RW90**: 8 tasks, 9 reads in 10, 1 ms of work while holding: the
//!   read-write lock against the plain lock (target: at least 4x), and the
//!   same workload on tokio's in-process `Mutex` and `RwLock` with no store,
//!   the ceiling of what the read-write split can gain here;
//! - **C8 fair**, **C8m fair** and **W1000 fair**: 8 Lockers (as 8
//!   processes) of one task each, 2 Lockers of 4 tasks each, and one
//!   Locker of 1000 tasks, on one key, 1 ms held: the fair lock against
//!   the plain lock, with the handoff (from the start of a release to the
//!   next holder's grant) against a lock request's round trip measured in
//!   the same run, and the spread: the fewest acquisitions of a task over
//!   the most (1.0: all served alike).
//!
//! Each row prints acquisitions per second and the lock commands the server
//! got per acquisition (`EVALSHA`, `SUBSCRIBE`, ... from `INFO
//! commandstats`).
//!
//! `cargo run --release -p lock-bench --example family`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_core::{LockError, LockGuard, Locker};
use lock_testkit::{RedisServer, lock_commands_sent};

const WINDOW: Duration = Duration::from_secs(3);
const WORK: Duration = Duration::from_millis(1);

/// How one task takes the lock of a workload.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Fair,
    /// Reads, with one write every `.0` acquisitions of a task.
    ReadWrite(u64),
    Semaphore(u32),
    Striped(u32),
}

impl Kind {
    /// Takes the lock for a task's `n`th acquisition.
    async fn take(self, locker: &Locker, key: &str, n: u64) -> Result<LockGuard, LockError> {
        let request = match self {
            Kind::Plain => locker.lock(key),
            Kind::Fair => locker.fair_lock(key),
            Kind::ReadWrite(every) if n % every == every - 1 => locker.write_lock(key),
            Kind::ReadWrite(_) => locker.read_lock(key),
            Kind::Semaphore(n) => locker.semaphore(key, n),
            Kind::Striped(k) => locker.striped(key, k),
        };
        request.wait(Duration::from_secs(30)).await
    }
}

/// What one workload measured.
struct Measured {
    per_second: f64,
    commands: f64,
    /// Fewest acquisitions of a task over the most.
    spread: f64,
    /// Median time from a release to the next acquisition.
    handoff: Duration,
}

/// `tasks` tasks over `lockers` Lockers taking `kind` on `key` for the window.
async fn run(
    server: &RedisServer,
    kind: Kind,
    key: &str,
    tasks: usize,
    lockers: usize,
) -> Measured {
    let mut all = Vec::new();
    for _ in 0..lockers {
        all.push(Locker::redis(&server.url()).await.expect("connect"));
    }
    let mut conn = server.connection().await;
    let before = lock_commands_sent(&mut conn).await;
    let released: Arc<Mutex<Option<Instant>>> = Arc::default();
    let handoffs: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let locker = all[i % lockers].clone();
            let (released, handoffs, key) = (released.clone(), handoffs.clone(), key.to_owned());
            let done = done.clone();
            tokio::spawn(async move {
                let mut mine = 0;
                while started.elapsed() < WINDOW {
                    let guard = kind.take(&locker, &key, mine).await.expect("acquire");
                    if let Some(at) = released.lock().unwrap().take() {
                        handoffs.lock().unwrap().push(at.elapsed());
                    }
                    tokio::time::sleep(WORK).await;
                    *released.lock().unwrap() = Some(Instant::now());
                    guard.release().await.expect("release");
                    mine += 1;
                    done.fetch_add(1, Ordering::Relaxed);
                }
                mine
            })
        })
        .collect();
    let mut counts = Vec::new();
    for handle in handles {
        counts.push(handle.await.expect("task"));
    }
    let seconds = started.elapsed().as_secs_f64();
    let acquisitions = done.load(Ordering::Relaxed) as f64;
    let commands = (lock_commands_sent(&mut conn).await - before) as f64;
    let (fewest, most) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    let mut handoffs = handoffs.lock().unwrap().clone();
    handoffs.sort();
    Measured {
        per_second: acquisitions / seconds,
        commands: commands / acquisitions,
        spread: *fewest as f64 / (*most).max(1) as f64,
        handoff: handoffs
            .get(handoffs.len() / 2)
            .copied()
            .unwrap_or_default(),
    }
}

/// The same RW90 workload on tokio's in-process locks, with no store: the
/// ceiling of the read-write lock's gain for these tasks and this work
/// (`tokio::sync::RwLock` also keeps new readers behind a waiting writer).
/// Acquisitions per second under a `Mutex` and under a `RwLock`.
async fn in_process_ceiling(tasks: usize, every: u64) -> (f64, f64) {
    let mutex = Arc::new(tokio::sync::Mutex::new(()));
    let rwlock = Arc::new(tokio::sync::RwLock::new(()));
    let mut rates = [0.0; 2];
    for (i, rate) in rates.iter_mut().enumerate() {
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (mutex, rwlock, done) = (mutex.clone(), rwlock.clone(), done.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while started.elapsed() < WINDOW {
                        if i == 0 {
                            let _held = mutex.lock().await;
                            tokio::time::sleep(WORK).await;
                        } else if n % every == every - 1 {
                            let _held = rwlock.write().await;
                            tokio::time::sleep(WORK).await;
                        } else {
                            let _held = rwlock.read().await;
                            tokio::time::sleep(WORK).await;
                        }
                        n += 1;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await.expect("task");
        }
        *rate = done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    }
    (rates[0], rates[1])
}

/// Median round trips to the server: of a `PING`, and of a lock request
/// (an uncontended acquire: one script call).
async fn round_trips(server: &RedisServer) -> (Duration, Duration) {
    let mut conn = server.connection().await;
    let locker = Locker::redis(&server.url()).await.expect("connect");
    let (mut pings, mut locks) = (Vec::new(), Vec::new());
    for i in 0..500 {
        let sent = Instant::now();
        let _: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .expect("PING");
        pings.push(sent.elapsed());
        let sent = Instant::now();
        let guard = locker.lock(format!("trip:{i}")).await.expect("acquire");
        locks.push(sent.elapsed());
        guard.release().await.expect("release");
    }
    pings.sort();
    locks.sort();
    (pings[pings.len() / 2], locks[locks.len() / 2])
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
            1,
            Kind::Semaphore(4),
            "semaphore of 4",
        ),
        (
            "K8: 16 tasks, inventory, 1 ms held",
            16,
            1,
            Kind::Striped(8),
            "striped, 8 segments",
        ),
        (
            "RW90: 8 tasks, 9 reads in 10, 1 ms held",
            8,
            1,
            Kind::ReadWrite(10),
            "read-write lock",
        ),
        (
            "C8: 8 Lockers of 1 task, 1 ms held",
            8,
            8,
            Kind::Fair,
            "fair lock",
        ),
        (
            "C8m: 2 Lockers of 4 tasks, 1 ms held",
            8,
            2,
            Kind::Fair,
            "fair lock",
        ),
        (
            "W1000: 1 Locker of 1000 tasks, 1 ms held",
            1000,
            1,
            Kind::Fair,
            "fair lock",
        ),
    ];
    let mut spreads = Vec::new();
    for (n, (workload, tasks, lockers, kind, label)) in rows.into_iter().enumerate() {
        let plain = run(&server, Kind::Plain, &format!("plain:{n}"), tasks, lockers).await;
        let family = run(&server, kind, &format!("family:{n}"), tasks, lockers).await;
        println!(
            "| {workload} | plain lock, one key | {:.0} | 1.00 | {:.2} |",
            plain.per_second, plain.commands
        );
        println!(
            "| {workload} | {label} | {:.0} | {:.2} | {:.2} |",
            family.per_second,
            family.per_second / plain.per_second,
            family.commands
        );
        if matches!(kind, Kind::Fair) {
            let workload = workload.split(':').next().unwrap_or(workload);
            spreads.push((workload, plain, family));
        }
    }
    let (mutex, rwlock) = in_process_ceiling(8, 10).await;
    println!(
        "| RW90 ceiling, no store | tokio Mutex / RwLock in one process | {mutex:.0} / {rwlock:.0} | {:.2} | - |",
        rwlock / mutex
    );
    let (ping, trip) = round_trips(&server).await;
    println!();
    println!(
        "Round trips: PING {ping:?}, lock request {trip:?} (a handoff is at least two: a release and an acquire)."
    );
    println!();
    println!(
        "| workload | subject | handoff p50 | in lock round trips | spread (fewest / most per task) |"
    );
    println!("|---|---|---|---|---|");
    for (workload, plain, fair) in spreads {
        for (label, m) in [("plain lock", plain), ("fair lock", fair)] {
            println!(
                "| {workload} | {label} | {:?} | {:.1} | {:.2} |",
                m.handoff,
                m.handoff.as_secs_f64() / trip.as_secs_f64(),
                m.spread
            );
        }
    }
}
