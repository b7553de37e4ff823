//! lock-core on PostgreSQL against two references in one run, on one
//! server: a ShedLock-style lease (one `INSERT ... ON CONFLICT DO UPDATE
//! ... WHERE lock_until <= now()` to take it, one `UPDATE` to end it; a
//! waiter asks again every 2 ms) and `pg_try_advisory_lock` /
//! `pg_advisory_unlock` (U1; C8 and W1000 wait in `pg_advisory_lock`, on a
//! connection each). Workloads U1, C8 and W1000 (`shared/workloads.rs`),
//! rounds interleaved with one write round trip as the unit. Reports
//! acquisitions/s, acquire p50 in round trips, top-level statements per
//! acquisition (`pg_stat_statements`), the server's CPU per acquisition
//! (every process of the cluster) and, for C8, the handoff p50.
//!
//! `cargo run --release -p lock-bench --example postgres`

use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use lock_core::Locker;
use lock_testkit::PostgresServer;
use tokio_postgres::NoTls;

#[path = "shared/workloads.rs"]
mod workloads;
use workloads::{Lock, Run, handoffs, median, p50, run};

const ROUNDS: usize = 3;
/// The lease of every subject.
const TTL_MS: i64 = 10_000;

/// A pool of `size` connections to `server`.
fn pool(server: &PostgresServer, size: usize) -> Pool {
    let config: tokio_postgres::Config = server.url().parse().expect("config");
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager).max_size(size).build().expect("pool")
}

/// The ShedLock-style lease: a row per name, taken by one statement when
/// free or expired, ended by one owner-checked statement.
#[derive(Clone)]
struct ShedLock {
    pool: Pool,
}

const SHED_TAKE: &str = "INSERT INTO shedlock (name, lock_until, locked_at, locked_by)
    VALUES ($1, now() + $2::bigint * interval '1 millisecond', now(), $3)
    ON CONFLICT (name) DO UPDATE
       SET lock_until = EXCLUDED.lock_until, locked_at = EXCLUDED.locked_at,
           locked_by = EXCLUDED.locked_by
     WHERE shedlock.lock_until <= now()";
const SHED_END: &str = "UPDATE shedlock SET lock_until = now() WHERE name = $1 AND locked_by = $2";

impl Lock for ShedLock {
    type Held = (String, String);

    async fn acquire(&self, key: String) -> (String, String) {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let me = NEXT
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .to_string();
        loop {
            let client = self.pool.get().await.expect("connection");
            let take = client.prepare_cached(SHED_TAKE).await.expect("prepare");
            let taken = client.execute(&take, &[&key, &TTL_MS, &me]).await;
            drop(client);
            if taken.expect("take") == 1 {
                return (key, me);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    async fn release(&self, (key, me): (String, String)) {
        let client = self.pool.get().await.expect("connection");
        let end = client.prepare_cached(SHED_END).await.expect("prepare");
        client.execute(&end, &[&key, &me]).await.expect("end");
    }
}

/// Advisory session locks: the connection that took one must end it.
#[derive(Clone)]
struct Advisory {
    pool: Pool,
}

impl Lock for Advisory {
    type Held = (deadpool_postgres::Object, String);

    async fn acquire(&self, key: String) -> (deadpool_postgres::Object, String) {
        let client = self.pool.get().await.expect("connection");
        let take = client
            .prepare_cached("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .await
            .expect("prepare");
        let taken: bool = client.query_one(&take, &[&key]).await.expect("try").get(0);
        if !taken {
            let wait = client
                .prepare_cached("SELECT pg_advisory_lock(hashtextextended($1, 0))")
                .await
                .expect("prepare");
            client.query_one(&wait, &[&key]).await.expect("wait");
        }
        (client, key)
    }

    async fn release(&self, (client, key): (deadpool_postgres::Object, String)) {
        let end = client
            .prepare_cached("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
            .await
            .expect("prepare");
        client.query_one(&end, &[&key]).await.expect("unlock");
    }
}

/// A subject: a label and the lock it drives.
enum Subject {
    Core(Locker),
    ShedLock(ShedLock),
    Advisory(Advisory),
}

impl Subject {
    fn label(&self) -> &'static str {
        match self {
            Subject::Core(_) => "lock-core",
            Subject::ShedLock(_) => "ShedLock-style lease",
            Subject::Advisory(_) => "pg_try_advisory_lock",
        }
    }

    async fn run(&self, workload: &str, round: usize) -> Run {
        match self {
            Subject::Core(locker) => run(locker, workload, round).await,
            Subject::ShedLock(shed) => run(shed, workload, round).await,
            Subject::Advisory(advisory) => run(advisory, workload, round).await,
        }
    }
}

/// Top-level statements the server has run so far (this one's included).
async fn statements(admin: &tokio_postgres::Client) -> i64 {
    let row = admin
        .query_one("SELECT sum(calls)::bigint FROM pg_stat_statements", &[])
        .await
        .expect("pg_stat_statements");
    row.get::<_, Option<i64>>(0).unwrap_or(0)
}

/// Nanoseconds the cluster's processes have run so far.
fn cpu_ns(server: &PostgresServer) -> u64 {
    server
        .pids()
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// The median of 200 single-row write round trips, in µs.
async fn round_trip_us(admin: &tokio_postgres::Client) -> f64 {
    let write = admin
        .prepare("UPDATE rt SET n = n + 1 WHERE id = 1")
        .await
        .expect("prepare");
    let mut times = Vec::with_capacity(200);
    for _ in 0..200 {
        let started = Instant::now();
        admin.execute(&write, &[]).await.expect("write");
        times.push(started.elapsed());
    }
    p50(&mut times)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server =
        PostgresServer::start_with_settings(&["shared_preload_libraries=pg_stat_statements"]);
    let admin = server.client().await;
    admin
        .batch_execute(
            "CREATE EXTENSION pg_stat_statements;
             CREATE TABLE shedlock (name text PRIMARY KEY, lock_until timestamptz NOT NULL,
                                    locked_at timestamptz NOT NULL, locked_by text NOT NULL);
             CREATE TABLE rt (id int PRIMARY KEY, n bigint NOT NULL);
             INSERT INTO rt VALUES (1, 0);",
        )
        .await
        .expect("setup");
    let locker = Locker::builder()
        .ttl(Duration::from_millis(TTL_MS as u64))
        .wait(Duration::from_secs(120))
        .postgres(&server.postgres_url())
        .await
        .expect("lock-core on PostgreSQL");
    // Four connections each, as lock-core's pool; the advisory locks need
    // one per holder or waiter, so eight.
    let subjects = [
        Subject::Core(locker),
        Subject::ShedLock(ShedLock {
            pool: pool(&server, 4),
        }),
        Subject::Advisory(Advisory {
            pool: pool(&server, 8),
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
    server: &PostgresServer,
    admin: &tokio_postgres::Client,
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
