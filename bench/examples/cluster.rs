//! Redis Cluster against one server: U16 (16 tasks taking and releasing
//! locks on distinct keys through one Locker) on a standalone Redis and on
//! a cluster of 3 masters and 3 replicas, interleaved in one run, without
//! and with `replicas(1, 1 s)` (the standalone server then gets a replica
//! of its own). Reports acquisitions/s, the ratio to standalone, and the
//! commands each master served per acquisition (`INFO commandstats`,
//! counters reset before each window) and the CPU time the masters' main
//! threads spent per acquisition (`/proc/<pid>/schedstat`), a figure the
//! load of the 2-core machine disturbs less than throughput.
//!
//! `cargo run --release -p lock-bench --example cluster`

use std::time::Duration;

use lock_core::Locker;

#[path = "shared/u16.rs"]
mod u16;
use lock_testkit::{ClusterSet, LOCK_CLIENT_COMMANDS, RedisServer, command_calls};
use u16::u16;

const ROUNDS: usize = 3;

/// Commands the lock client sent to each of `masters` since their last
/// reset (and resets them again).
async fn commands(masters: &[&RedisServer]) -> Vec<u64> {
    let mut sent = Vec::new();
    for master in masters {
        let mut conn = master.connection().await;
        let mut n = 0;
        for command in LOCK_CLIENT_COMMANDS {
            n += command_calls(&mut conn, command).await;
        }
        sent.push(n);
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut conn)
            .await
            .expect("CONFIG RESETSTAT");
    }
    sent
}

/// The masters of `cluster` (the nodes whose `ROLE` says so).
async fn masters(cluster: &ClusterSet) -> Vec<&RedisServer> {
    let mut masters = Vec::new();
    for node in cluster.nodes() {
        let mut conn = node.connection().await;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut conn).await.unwrap();
        if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
            masters.push(node);
        }
    }
    masters
}

/// Nanoseconds the main threads of `servers` have run so far.
fn server_cpu_ns(servers: &[&RedisServer]) -> u64 {
    servers
        .iter()
        .filter_map(|server| {
            let stat =
                std::fs::read_to_string(format!("/proc/{}/schedstat", server.pid()?)).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// One U16 window: acquisitions/s, the commands per acquisition each
/// master served, and the masters' CPU µs per acquisition.
struct Measured {
    rate: f64,
    per_node: Vec<f64>,
    cpu_us: f64,
}

async fn measure(locker: &Locker, masters: &[&RedisServer], label: &str) -> Measured {
    commands(masters).await;
    let cpu = server_cpu_ns(masters);
    let (done, rate) = u16(locker, label).await;
    let cpu_us = (server_cpu_ns(masters) - cpu) as f64 / 1000.0 / done as f64;
    let per_node = commands(masters)
        .await
        .into_iter()
        .map(|n| n as f64 / done as f64)
        .collect();
    Measured {
        rate,
        per_node,
        cpu_us,
    }
}

fn row(label: &str, measured: &Measured, reference: &Measured) {
    let nodes: Vec<String> = measured
        .per_node
        .iter()
        .map(|n| format!("{n:.2}"))
        .collect();
    let total: f64 = measured.per_node.iter().sum();
    println!(
        "| {label} | {:.0} | {:.2} | {} | {total:.2} | {:.1} |",
        measured.rate,
        measured.rate / reference.rate,
        nodes.join(" / "),
        measured.cpu_us,
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = RedisServer::start();
    let replica = server.start_replica().await;
    server.wait_for_replicas(1).await;
    let cluster = ClusterSet::start();
    let cluster_masters = masters(&cluster).await;
    for master in &cluster_masters {
        // Every master's replica has caught up before `replicas(1, ..)`.
        let mut conn = master.connection().await;
        let synced: usize = redis::cmd("WAIT")
            .arg(1)
            .arg(30_000)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(synced, 1, "a master's replica did not sync");
    }
    let within = Duration::from_secs(1);
    let standalone = Locker::redis(&server.url()).await.expect("connect");
    let standalone_acked = Locker::builder()
        .replicas(1, within)
        .redis(&server.url())
        .await
        .expect("connect");
    let clustered = Locker::redis(&cluster.url()).await.expect("connect");
    let clustered_acked = Locker::builder()
        .replicas(1, within)
        .redis(&cluster.url())
        .await
        .expect("connect");
    println!(
        "| U16 | acquisitions/s | × standalone | commands / acquisition per master | total | masters' CPU µs / acquisition |"
    );
    println!("|---|---|---|---|---|---|");
    for round in 0..ROUNDS {
        let one = [&server];
        let base = measure(&standalone, &one, &format!("s{round}")).await;
        let cluster = measure(&clustered, &cluster_masters, &format!("c{round}")).await;
        let acked = measure(&standalone_acked, &one, &format!("sa{round}")).await;
        let cluster_acked =
            measure(&clustered_acked, &cluster_masters, &format!("ca{round}")).await;
        row("standalone", &base, &base);
        row("cluster, 3 masters", &cluster, &base);
        row("standalone, replicas(1, 1 s)", &acked, &acked);
        row("cluster, replicas(1, 1 s)", &cluster_acked, &acked);
    }
    drop(replica);
}
