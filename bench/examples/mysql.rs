//! lock-core on MySQL (MariaDB from the test kit) against two references
//! in one run, on one server: a ShedLock-style lease (one `INSERT ... ON
//! DUPLICATE KEY UPDATE` that takes the row when free or expired, one
//! `UPDATE` to end it; a waiter asks again every 2 ms) and `GET_LOCK` /
//! `RELEASE_LOCK` (a session lock: U1 tries with a zero timeout, C8 and
//! W1000 wait in `GET_LOCK`, on a connection each). Workloads U1, C8 and
//! W1000 (`shared/workloads.rs`), rounds interleaved with one write round
//! trip as the unit. Reports acquisitions/s, acquire p50 in round trips,
//! statements the clients sent per acquisition (the server's `Questions`),
//! the server's CPU per acquisition and, for C8, the handoff p50.
//!
//! `cargo run --release -p lock-bench --example mysql`

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_testkit::MysqlServer;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::pool::PoolConnection;
use sqlx::{MySql, Row};

#[path = "shared/workloads.rs"]
mod workloads;
use workloads::{Lock, Run, handoffs, median, p50, run};

const ROUNDS: usize = 3;
/// The lease of every subject.
const TTL_MS: i64 = 10_000;

/// A pool of `size` connections to `server`.
async fn pool(server: &MysqlServer, size: u32) -> MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(Duration::from_secs(120))
        .connect(&server.mysql_url())
        .await
        .expect("pool")
}

/// The ShedLock-style lease: a row per name, taken by one statement when
/// free or expired, ended by one owner-checked statement.
#[derive(Clone)]
struct ShedLock {
    pool: MySqlPool,
}

const SHED_TAKE: &str = "UPDATE shedlock
    SET lock_until = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND,
        locked_at = UTC_TIMESTAMP(6), locked_by = ?
    WHERE name = ? AND lock_until <= UTC_TIMESTAMP(6)";
const SHED_NEW: &str = "INSERT IGNORE INTO shedlock (name, lock_until, locked_at, locked_by)
    VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND, UTC_TIMESTAMP(6), ?)";
const SHED_END: &str =
    "UPDATE shedlock SET lock_until = UTC_TIMESTAMP(6) WHERE name = ? AND locked_by = ?";

impl Lock for ShedLock {
    type Held = (String, String);

    /// As ShedLock's JDBC provider: take an expired row, else insert one.
    async fn acquire(&self, key: String) -> (String, String) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let me = NEXT
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        loop {
            let taken = sqlx::query(SHED_TAKE)
                .bind(TTL_MS)
                .bind(&me)
                .bind(&key)
                .execute(&self.pool)
                .await
                .expect("take");
            if taken.rows_affected() == 1 {
                return (key, me);
            }
            let made = sqlx::query(SHED_NEW)
                .bind(&key)
                .bind(TTL_MS)
                .bind(&me)
                .execute(&self.pool)
                .await
                .expect("insert");
            if made.rows_affected() == 1 {
                return (key, me);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn release(&self, (key, me): (String, String)) {
        sqlx::query(SHED_END)
            .bind(&key)
            .bind(&me)
            .execute(&self.pool)
            .await
            .expect("end");
    }
}

/// Named session locks: the connection that took one must end it.
#[derive(Clone)]
struct NamedLock {
    pool: MySqlPool,
}

impl Lock for NamedLock {
    type Held = (PoolConnection<MySql>, String);

    async fn acquire(&self, key: String) -> (PoolConnection<MySql>, String) {
        let mut connection = self.pool.acquire().await.expect("connection");
        let taken: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
            .bind(&key)
            .fetch_one(&mut *connection)
            .await
            .expect("try");
        if taken != Some(1) {
            let _: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 120)")
                .bind(&key)
                .fetch_one(&mut *connection)
                .await
                .expect("wait");
        }
        (connection, key)
    }

    async fn release(&self, (mut connection, key): (PoolConnection<MySql>, String)) {
        let _: Option<i64> = sqlx::query_scalar("SELECT RELEASE_LOCK(?)")
            .bind(&key)
            .fetch_one(&mut *connection)
            .await
            .expect("unlock");
    }
}

/// A subject: a label and the lock it drives.
enum Subject {
    Core(Locker),
    ShedLock(ShedLock),
    Named(NamedLock),
}

impl Subject {
    fn label(&self) -> &'static str {
        match self {
            Subject::Core(_) => "lock-core",
            Subject::ShedLock(_) => "ShedLock-style lease",
            Subject::Named(_) => "GET_LOCK",
        }
    }

    async fn run(&self, workload: &str, round: usize) -> Run {
        match self {
            Subject::Core(locker) => run(locker, workload, round).await,
            Subject::ShedLock(shed) => run(shed, workload, round).await,
            Subject::Named(named) => run(named, workload, round).await,
        }
    }
}

/// Statements clients have sent so far (this one's included).
async fn statements(admin: &MySqlPool) -> i64 {
    let row = sqlx::query("SHOW GLOBAL STATUS LIKE 'Questions'")
        .fetch_one(admin)
        .await
        .expect("Questions");
    let value: String = row.try_get(1).expect("a count");
    value.parse().unwrap_or(0)
}

/// Nanoseconds the server's threads have run so far.
fn cpu_ns(server: &MysqlServer) -> u64 {
    let Some(pid) = server.pid() else { return 0 };
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    threads
        .flatten()
        .filter_map(|thread| {
            let stat = std::fs::read_to_string(thread.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The median of 200 single-row write round trips, in µs.
async fn round_trip_us(admin: &MySqlPool) -> f64 {
    let mut times = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        sqlx::query("UPDATE rt SET n = n + 1 WHERE id = 1")
            .execute(admin)
            .await
            .expect("write");
        times.push(started.elapsed());
    }
    p50(&mut times)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = MysqlServer::start();
    let admin = pool(&server, 1).await;
    for setup in [
        "CREATE TABLE shedlock (name VARCHAR(64) PRIMARY KEY, lock_until DATETIME(6) NOT NULL,
                                locked_at DATETIME(6) NOT NULL, locked_by VARCHAR(255) NOT NULL)",
        "CREATE TABLE rt (id INT PRIMARY KEY, n BIGINT NOT NULL)",
        "INSERT INTO rt VALUES (1, 0)",
    ] {
        sqlx::query(setup).execute(&admin).await.expect("setup");
    }
    let locker = Locker::builder()
        .ttl(Duration::from_millis(TTL_MS as u64))
        .wait(Duration::from_secs(120))
        .mysql(&server.mysql_url())
        .await
        .expect("lock-core on MySQL");
    // Four connections each, as lock-core's pool; the named locks need one
    // per holder or waiter, so eight.
    let subjects = [
        Subject::Core(locker),
        Subject::ShedLock(ShedLock {
            pool: pool(&server, 4).await,
        }),
        Subject::Named(NamedLock {
            pool: pool(&server, 8).await,
        }),
    ];
    println!(
        "| workload | subject | acquisitions/s | ratio to ShedLock-style | write round trip µs | acquire p50 µs (round trips) | statements / acquisition | server CPU µs / acquisition | handoff p50 µs (round trips) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for workload in ["U1", "C8", "W1000"] {
        let mut rows = Vec::new();
        let mut runs: Vec<Vec<(f64, Figures)>> = subjects.iter().map(|_| Vec::new()).collect();
        for round in 0..ROUNDS {
            // Each round runs every subject, in an order turned each round.
            let mut order: Vec<usize> = (0..subjects.len()).collect();
            order.rotate_left(round % subjects.len());
            for i in order {
                let rt = round_trip_us(&admin).await;
                let figures = measure(&subjects[i], &server, &admin, workload, round).await;
                runs[i].push((rt, figures));
            }
        }
        let shed_rate = median(runs[1].iter().map(|(_, f)| f.rate).collect());
        for (subject, runs) in subjects.iter().zip(runs) {
            let rt = median(runs.iter().map(|(rt, _)| *rt).collect());
            let rate = median(runs.iter().map(|(_, f)| f.rate).collect());
            let acquire_us = median(runs.iter().map(|(_, f)| f.acquire_p50_us).collect());
            let acquire = median(runs.iter().map(|(rt, f)| f.acquire_p50_us / rt).collect());
            let statements = median(runs.iter().map(|(_, f)| f.statements).collect());
            let cpu = median(runs.iter().map(|(_, f)| f.server_cpu_us).collect());
            let handoff = match workload {
                "C8" => {
                    let us = median(runs.iter().filter_map(|(_, f)| f.handoff_p50_us).collect());
                    let trips = median(
                        runs.iter()
                            .filter_map(|(rt, f)| Some(f.handoff_p50_us? / rt))
                            .collect(),
                    );
                    format!("{us:.0} ({trips:.1})")
                }
                _ => "-".to_owned(),
            };
            rows.push(format!(
                "| {workload} | {} | {rate:.0} | {:.2} | {rt:.0} | {acquire_us:.0} ({acquire:.1}) | {statements:.2} | {cpu:.1} | {handoff} |",
                subject.label(),
                rate / shed_rate
            ));
        }
        for row in rows {
            println!("{row}");
        }
    }
}

/// One workload's figures in one round.
struct Figures {
    rate: f64,
    acquire_p50_us: f64,
    statements: f64,
    server_cpu_us: f64,
    handoff_p50_us: Option<f64>,
}

async fn measure(
    subject: &Subject,
    server: &MysqlServer,
    admin: &MySqlPool,
    workload: &str,
    round: usize,
) -> Figures {
    let before = statements(admin).await;
    let cpu = cpu_ns(server);
    let started = Instant::now();
    let Run {
        done,
        mut waits,
        spans,
    } = subject.run(workload, round).await;
    let elapsed = started.elapsed();
    let server_cpu_us = (cpu_ns(server) - cpu) as f64 / 1000.0 / done as f64;
    // The count's own statement is not the subject's.
    let statements = (statements(admin).await - before - 1) as f64 / done as f64;
    let mut handoffs = handoffs(spans);
    Figures {
        rate: done as f64 / elapsed.as_secs_f64(),
        acquire_p50_us: p50(&mut waits),
        statements,
        server_cpu_us,
        handoff_p50_us: (workload == "C8").then(|| p50(&mut handoffs)),
    }
}
