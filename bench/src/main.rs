//! Benchmarks of lock-core, as a program (not a timed test).
//!
//! ```text
//! cargo run --release -p lock-bench -- [rounds] [--only U1,C8,...] [--subjects redis,rslock]
//! ```
//!
//! Starts its own redis-server (or uses `REDIS_URL`) and measures, in the
//! same run and interleaved (for every workload of every round the
//! reference first, then each subject, the subjects' order reversed every
//! other round), because one-client round trips on a shared machine swing
//! from minute to minute:
//! - the reference: one `SET` and one `EVALSHA` of a lock-sized script back
//!   to back on one multiplexed connection, the "pair limit";
//! - lock-core on Redis and on the memory backend, and the peer rslock 0.10
//!   (single instance, default settings), on U1 (one task, distinct keys),
//!   U16 (16 tasks, distinct keys, one shared Locker / manager), C8 (8 tasks
//!   on one key, a shared counter, 1 ms of work outside the lock), C8p (C8
//!   as 4 processes x 2 tasks) and W1000 (1000 tasks on one key);
//! - L: an axum route behind `LockLayer` against the bare route (and behind
//!   a layer that does nothing: axum's own share; and behind the least a lock
//!   layer can do, a yardstick: `minimal_layer`) under HTTP load from a
//!   child process (16 connections, and 1 for latency); each
//!   stack loads three times per round, interleaved, and keeps its best;
//! - the state memory per waiting task and per held lock.
//!
//! It prints Markdown tables (ratios are medians over rounds of per-round
//! ratios) and writes them with a PNG chart to `bench/results/`.

mod chart;
mod cpu;
mod memory;
mod stacks;
mod stats;
mod subject;
mod workloads;

use std::path::PathBuf;

use lock_testkit::RedisServer;

use crate::stacks::Stack;
use crate::stats::Row;
use crate::subject::Subject;
use crate::workloads::http;
use crate::workloads::{CommandCount, contention, distinct, processes, reference};

#[global_allocator]
static ALLOCATOR: memory::Counting = memory::Counting;

/// The lock workloads, in table order.
const WORKLOADS: [&str; 5] = ["U1", "U16", "C8", "C8p", "W1000"];

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("child") {
        match args.get(1).map(String::as_str) {
            Some("c8p") => processes::child(&args[2..]).await,
            Some("load") => http::child(&args[2..]).await,
            other => panic!("unknown child {other:?}"),
        }
        return;
    }
    let rounds: usize = args.first().and_then(|r| r.parse().ok()).unwrap_or(5);
    let only = list_option(&args, "--only");
    let wanted = |workload: &str| {
        only.as_ref()
            .is_none_or(|o| o.iter().any(|w| w == workload))
    };
    // `--subjects redis,rslock`: only subjects whose label contains one of these.
    let subjects_wanted = list_option(&args, "--subjects");

    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    };
    let client = redis::Client::open(url.as_str()).expect("url");
    let subjects: Vec<Subject> = [
        Subject::core_redis(&url).await,
        Subject::rslock(&url),
        Subject::core_memory(),
    ]
    .into_iter()
    .filter(|s| {
        subjects_wanted
            .as_ref()
            .is_none_or(|w| w.iter().any(|w| s.label().contains(w.as_str())))
    })
    .collect();
    let cpu = cpu::CpuClock::new(&client).await;
    let mut rows: Vec<Row> = Vec::new();
    for round in 0..rounds {
        let mut order: Vec<&Subject> = subjects.iter().collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for workload in WORKLOADS.into_iter().filter(|w| wanted(w)) {
            let reference = measure(&cpu, reference::pair_limit(&client)).await;
            let mut measured = Vec::new();
            for subject in &order {
                let before = cpu.read();
                let mut row = match workload {
                    "U1" => distinct::u1(subject, &client).await,
                    "U16" => distinct::u16(subject, &client).await,
                    "C8" => contention::c8(subject, &client).await,
                    "C8p" if subject.on_redis() => processes::c8p(subject, &url, &client).await,
                    "W1000" => contention::w1000(subject, &client).await,
                    _ => continue,
                };
                row.cpu = before.per_op(&cpu.read(), row.acquisitions);
                if workload == "C8p" {
                    row.cpu.client = None; // spent in the child processes
                }
                measured.push(row);
            }
            let peer = measured
                .iter()
                .find(|r| r.subject == "rslock")
                .map(|r| r.ops_per_sec);
            for row in &mut measured {
                row.vs_reference
                    .push(row.ops_per_sec / reference.ops_per_sec);
                if let (Some(peer), true) = (peer, row.subject.starts_with("lock-core")) {
                    row.vs_peer.push(row.ops_per_sec / peer);
                }
            }
            progress(round, workload, Some(&reference), &measured);
            measured.insert(0, reference);
            merge(&mut rows, measured);
        }
        if wanted("L") {
            let reference = reference::pair_limit(&client).await;
            for connections in [16, 1] {
                // Each stack with the subject whose Redis commands it sends.
                let mut stacks = vec![
                    (Stack::Bare, None),
                    (Stack::Noop, None),
                    (Stack::Minimal, None),
                ];
                for subject in &order {
                    if let Some(locker) = subject.locker() {
                        stacks.push((Stack::Layered(locker, subject.label()), Some(*subject)));
                    }
                }
                if round % 2 == 1 {
                    stacks.reverse();
                }
                // Loads of a fraction of a second swing with whatever else
                // the machine does: each stack runs in turn several times
                // (A, B, A, B, ...) and keeps its best run, as noise only
                // ever slows a run down.
                let mut measured: Vec<Row> = Vec::new();
                for _ in 0..http::REPEATS {
                    for (stack, subject) in &stacks {
                        let count = match subject {
                            Some(subject) => CommandCount::start(&client, subject).await,
                            None => None,
                        };
                        let mut row = measure(&cpu, http::l(stack, connections)).await;
                        row.commands = workloads::per_acquisition(count, row.acquisitions).await;
                        match measured.iter_mut().find(|r| r.subject == row.subject) {
                            Some(best) if best.ops_per_sec >= row.ops_per_sec => {}
                            Some(best) => *best = row,
                            None => measured.push(row),
                        }
                    }
                }
                let bare = measured
                    .iter()
                    .find(|r| r.subject == "bare route")
                    .cloned()
                    .expect("bare route measured");
                for row in measured.iter_mut().filter(|r| r.subject != "bare route") {
                    row.vs_peer.push(row.ops_per_sec / bare.ops_per_sec);
                    if connections == 1 && row.subject.ends_with("redis") {
                        // The pair is two round trips.
                        let added = row.acquire.p50 - bare.acquire.p50;
                        row.round_trips.push(2.0 * added / reference.acquire.p50);
                    }
                }
                progress(round, &format!("L c{connections}"), None, &measured);
                merge(&mut rows, measured);
            }
        }
    }
    let mut memory_rows = Vec::new();
    if wanted("memory") {
        for subject in &subjects {
            memory_rows.push(contention::state_memory(subject, &client).await);
        }
    }
    report(&rows, &memory_rows, rounds);
}

/// The values of `name a,b,c` on the command line, if given.
fn list_option(args: &[String], name: &str) -> Option<Vec<String>> {
    let at = args.iter().position(|a| a == name)?;
    let list = args.get(at + 1)?;
    Some(list.split(',').map(str::to_owned).collect())
}

/// One line on stderr per workload and round.
fn progress(round: usize, workload: &str, reference: Option<&Row>, measured: &[Row]) {
    let reference = reference.map_or(String::new(), |r| {
        format!("pair limit {:.0}/s, ", r.ops_per_sec)
    });
    let rows: Vec<String> = measured
        .iter()
        .map(|r| format!("{} {:.0}/s", r.subject, r.ops_per_sec))
        .collect();
    eprintln!(
        "round {} {workload}: {reference}{}",
        round + 1,
        rows.join(", ")
    );
}

/// Runs one measurement and adds its CPU per operation.
async fn measure(cpu: &cpu::CpuClock, run: impl std::future::Future<Output = Row>) -> Row {
    let before = cpu.read();
    let mut row = run.await;
    row.cpu = before.per_op(&cpu.read(), row.acquisitions);
    row
}

/// Adds one round's rows to the table's.
fn merge(rows: &mut Vec<Row>, measured: Vec<Row>) {
    for row in measured {
        match rows
            .iter_mut()
            .find(|r| r.workload == row.workload && r.subject == row.subject)
        {
            Some(existing) => existing.merge(row),
            None => rows.push(row),
        }
    }
}

/// Prints the tables and writes them and the chart to `bench/results/`.
fn report(rows: &[Row], memory_rows: &[memory::StateMemory], rounds: usize) {
    let mut markdown = format!(
        "Medians of per-round ratios over {rounds} interleaved rounds; each other figure from the round with the median ops/s.\n\n{}",
        stats::table(rows)
    );
    if !memory_rows.is_empty() {
        markdown.push_str(
            "\nState memory (1000 waiters on one held key; 1000 locks held on distinct keys):\n\n",
        );
        markdown.push_str(&memory::table(memory_rows));
    }
    println!("{markdown}");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    if let Err(err) =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("table.md"), &markdown))
    {
        eprintln!("could not write {}: {err}", dir.display());
    }
    match chart::draw(rows, &dir.join("chart.png")) {
        Ok(()) => eprintln!("wrote {}", dir.join("chart.png").display()),
        Err(err) => eprintln!("no chart: {err}"),
    }
}
