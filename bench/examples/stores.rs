//! Redis against etcd and ZooKeeper, in one run: U1 (one task, distinct keys), C8 (8
//! tasks on one key, 1 ms of work outside the lock) and W1000 (1000 tasks
//! on one key, once each) with lock-core on each store, interleaved round
//! by round with one write round trip of the same store (Redis `SET`, etcd
//! `Put`, ZooKeeper `setData`) as the reference. Reports acquisitions/s, acquire p50 in round
//! trips, the store requests per acquisition (Redis `INFO commandstats`;
//! etcd's gRPC message counters, keep-alives and watches included;
//! ZooKeeper's `mntr` packets received, pings included), the
//! CPU time of the store's process per acquisition and, for
//! C8, the handoff p50: from a release to the next holder's acquisition.
//! etcd's own lock service (the v3lock `Lock`/`Unlock` RPCs, with one
//! lease for the run) runs the same workloads on an etcd of its own, as the
//! etcd reference.
//!
//! `cargo run --release -p lock-bench --example stores`

use std::time::{Duration, Instant};

use lock_core::Locker;
use lock_testkit::{EtcdServer, LOCK_CLIENT_COMMANDS, RedisServer, ZooKeeperServer, command_calls};

#[path = "shared/workloads.rs"]
mod workloads;
use workloads::{Lock, Run, handoffs, median, p50, run};

const ROUNDS: usize = 3;

/// A store under test: its Locker, and how to count its requests and time
/// one write round trip.
enum Store {
    Redis(RedisServer, Locker),
    Etcd(EtcdServer, Locker),
    /// etcd's lock service, on an etcd of its own.
    EtcdService(EtcdServer, Box<V3Lock>),
    ZooKeeper(ZooKeeperServer, Locker),
}

/// etcd's lock service: `Lock` (held under one lease) and `Unlock`.
#[derive(Clone)]
struct V3Lock {
    client: etcd_client::Client,
    lease: i64,
}

impl V3Lock {
    async fn new(member: &EtcdServer) -> Self {
        let mut client = lock_testkit::etcd_client(member).await;
        let lease = client.lease_grant(600, None).await.expect("a lease").id();
        V3Lock { client, lease }
    }
}

impl Lock for V3Lock {
    type Held = Vec<u8>;

    async fn acquire(&self, key: String) -> Vec<u8> {
        let options = etcd_client::LockOptions::new().with_lease(self.lease);
        let held = self.client.clone().lock(key, Some(options)).await;
        held.expect("lock").key().to_vec()
    }

    async fn release(&self, held: Vec<u8>) {
        self.client.clone().unlock(held).await.expect("unlock");
    }
}

/// etcd's request methods a lock client uses.
const ETCD_METHODS: [&str; 6] = [
    "Txn",
    "Range",
    "DeleteRange",
    "LeaseGrant",
    "LeaseKeepAlive",
    "Watch",
];

impl Store {
    fn label(&self) -> &'static str {
        match self {
            Store::Redis(..) => "redis",
            Store::Etcd(..) => "etcd",
            Store::EtcdService(..) => "etcd lock service",
            Store::ZooKeeper(..) => "zookeeper",
        }
    }

    /// Requests the store has served to lock clients so far.
    async fn requests(&self) -> u64 {
        match self {
            Store::Redis(server, _) => {
                let mut conn = server.connection().await;
                let mut n = 0;
                for command in LOCK_CLIENT_COMMANDS {
                    n += command_calls(&mut conn, command).await;
                }
                n
            }
            Store::Etcd(member, _) | Store::EtcdService(member, _) => {
                // The lock service's own RPCs, and those above.
                let service = ["Lock", "Unlock"].iter().map(|m| member.requests(m));
                ETCD_METHODS
                    .iter()
                    .map(|m| member.requests(m))
                    .chain(service)
                    .sum()
            }
            Store::ZooKeeper(server, _) => {
                let stats = server.four_letters("mntr").expect("mntr");
                stats
                    .lines()
                    .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
                    .expect("zk_packets_received")
            }
        }
    }

    /// Nanoseconds the store's process has run so far (all its threads).
    fn cpu_ns(&self) -> u64 {
        let pid = match self {
            Store::Redis(server, _) => server.pid(),
            Store::Etcd(member, _) | Store::EtcdService(member, _) => member.pid(),
            Store::ZooKeeper(server, _) => server.pid(),
        };
        let Some(pid) = pid else { return 0 };
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return 0;
        };
        tasks
            .filter_map(|task| {
                let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
                stat.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum()
    }

    /// The median of 200 write round trips, in µs.
    async fn round_trip_us(&self) -> f64 {
        let mut times = Vec::with_capacity(200);
        match self {
            Store::Redis(server, _) => {
                let mut conn = server.connection().await;
                for i in 0..200 {
                    let started = Instant::now();
                    let _: () = redis::cmd("SET")
                        .arg("rt")
                        .arg(i)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    times.push(started.elapsed());
                }
            }
            Store::Etcd(member, _) | Store::EtcdService(member, _) => {
                let mut client = lock_testkit::etcd_client(member).await;
                for i in 0..200 {
                    let started = Instant::now();
                    client.put("rt", i.to_string(), None).await.unwrap();
                    times.push(started.elapsed());
                }
            }
            Store::ZooKeeper(server, _) => {
                let client = lock_testkit::zookeeper_client(server).await;
                let mode = zookeeper_client::CreateMode::Persistent;
                let options = mode.with_acls(zookeeper_client::Acls::anyone_all());
                let _ = client.create("/rt", b"", &options).await;
                for i in 0..200u32 {
                    let started = Instant::now();
                    client
                        .set_data("/rt", &i.to_be_bytes(), None)
                        .await
                        .unwrap();
                    times.push(started.elapsed());
                }
                client.delete("/rt", None).await.unwrap();
            }
        }
        p50(&mut times)
    }
}

/// One workload's figures in one round.
struct Measured {
    rate: f64,
    acquire_p50_us: f64,
    requests: f64,
    server_cpu_us: f64,
    handoff_p50_us: Option<f64>,
}

async fn measure(store: &Store, workload: &str, round: usize) -> Measured {
    let before = store.requests().await;
    let cpu = store.cpu_ns();
    let started = Instant::now();
    let Run {
        done,
        mut waits,
        spans,
    } = match store {
        Store::Redis(_, locker) | Store::Etcd(_, locker) | Store::ZooKeeper(_, locker) => {
            run(locker, workload, round).await
        }
        Store::EtcdService(_, service) => run(&**service, workload, round).await,
    };
    let elapsed = started.elapsed();
    let server_cpu_us = (store.cpu_ns() - cpu) as f64 / 1000.0 / done as f64;
    let requests = (store.requests().await - before) as f64 / done as f64;
    let mut handoffs = handoffs(spans);
    Measured {
        rate: done as f64 / elapsed.as_secs_f64(),
        acquire_p50_us: p50(&mut waits),
        requests,
        server_cpu_us,
        handoff_p50_us: (workload == "C8").then(|| p50(&mut handoffs)),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = RedisServer::start();
    let member = EtcdServer::start();
    let ttl = Duration::from_secs(10);
    let builder = || Locker::builder().ttl(ttl).wait(Duration::from_secs(120));
    let on_redis = builder().redis(&redis.url()).await.expect("redis");
    let on_etcd = builder()
        .etcd(&[member.endpoint().as_str()])
        .await
        .expect("etcd");
    let service_member = EtcdServer::start();
    let service = V3Lock::new(&service_member).await;
    let zookeeper = ZooKeeperServer::start();
    let on_zookeeper = builder()
        .zookeeper(&zookeeper.address())
        .await
        .expect("zookeeper");
    let stores = [
        Store::Redis(redis, on_redis),
        Store::Etcd(member, on_etcd),
        Store::EtcdService(service_member, Box::new(service)),
        Store::ZooKeeper(zookeeper, on_zookeeper),
    ];
    println!(
        "| workload | store | acquisitions/s | write round trip µs | acquire p50 µs (round trips) | requests / acquisition | store CPU µs / acquisition | handoff p50 µs (round trips) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for workload in ["U1", "C8", "W1000"] {
        for store in &stores {
            let mut runs = Vec::new();
            for round in 0..ROUNDS {
                let round_trip = store.round_trip_us().await;
                runs.push((round_trip, measure(store, workload, round).await));
            }
            let rt = median(runs.iter().map(|(rt, _)| *rt).collect());
            let rate = median(runs.iter().map(|(_, m)| m.rate).collect());
            let acquire = median(runs.iter().map(|(rt, m)| m.acquire_p50_us / rt).collect());
            let acquire_us = median(runs.iter().map(|(_, m)| m.acquire_p50_us).collect());
            let requests = median(runs.iter().map(|(_, m)| m.requests).collect());
            let cpu = median(runs.iter().map(|(_, m)| m.server_cpu_us).collect());
            let handoff = match workload {
                "C8" => {
                    let us = median(runs.iter().filter_map(|(_, m)| m.handoff_p50_us).collect());
                    let trips = median(
                        runs.iter()
                            .filter_map(|(rt, m)| Some(m.handoff_p50_us? / rt))
                            .collect(),
                    );
                    format!("{us:.0} ({trips:.1})")
                }
                _ => "-".to_owned(),
            };
            println!(
                "| {workload} | {} | {rate:.0} | {rt:.0} | {acquire_us:.0} ({acquire:.1}) | {requests:.2} | {cpu:.1} | {handoff} |",
                store.label()
            );
        }
    }
}
