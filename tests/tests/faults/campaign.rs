//! The randomized fault campaign: client processes taking every kind of
//! lock the store keeps (RedLock: the plain lock) on a few keys, with fenced
//! writes, while a nemesis drawn from a seed pauses, kills and restarts
//! clients and store members (Sentinel's: its sentinels), cuts connections,
//! steps store clocks and has the store fail over; then every history is
//! judged (`lock_testkit::campaign_history`).
//!
//! CI runs two fixed seeds per store (`campaign_<store>`). A failure prints
//! the seed, the store, the steps and, for each violation, the smallest
//! window of the history that shows it; `scripts/nemesis --seed S --store
//! NAME` replays it step for step, and `scripts/nemesis --minutes M` runs
//! new seeds and prints a summary table (`campaign_on_demand`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lock_core::{LockKind, Locker};
use lock_testkit::campaign_history::{Violation, check_campaign, window};
use lock_testkit::history::{Event, Facts, now_ms};
use lock_testkit::nemesis::{Fault, FaultKind, Menu, Step, schedule};
use lock_testkit::{
    ClockShift, ClusterSet, DelayProxy, EtcdServer, MysqlServer, PostgresServer, RedisServer,
    SentinelSet, ZooKeeperServer, lasting_keys, send_signal,
};

use crate::harness::{Clients, SLACK, history_lists, one_at_a_time};
use crate::scenarios::blocking;

/// Client processes, tasks per process and keys of every campaign.
const CLIENTS: usize = 4;
const TASKS: usize = 3;
const KEYS: u64 = 2;
/// How long the nemesis draws steps for (the last step may run past it).
const LENGTH: Duration = Duration::from_secs(6);
/// The kinds of lock every campaign's fenced writes use, by event name.
const NAMES: [&str; 5] = ["plain", "fair", "write", "permit", "segment"];

/// A deployment under the nemesis.
enum Deployment {
    /// One Redis server without persistence, reached through a proxy, on
    /// a clock the nemesis can step.
    Redis {
        server: RedisServer,
        proxy: DelayProxy,
        clock: ClockShift,
    },
    /// A master, a replica and 3 sentinels, the clients finding the
    /// master through them; the sentinels are the members the nemesis
    /// kills.
    Sentinel(SentinelSet),
    /// A Redis Cluster of 3 masters and 3 replicas, and the failovers so
    /// far; the replicas of the keys' masters are the members the nemesis
    /// kills.
    Cluster(ClusterSet, u64),
    /// An etcd of 3 members.
    Etcd(Vec<EtcdServer>),
    /// A ZooKeeper ensemble of 3.
    ZooKeeper(Vec<ZooKeeperServer>),
    /// RedLock over 3 Redis servers without persistence, each reached
    /// through a proxy, on a clock of its own.
    RedLock {
        servers: Vec<RedisServer>,
        proxies: Vec<DelayProxy>,
        clocks: Vec<ClockShift>,
    },
    /// One PostgreSQL server, reached through a proxy, on a clock the
    /// nemesis can step.
    Postgres {
        server: PostgresServer,
        proxy: DelayProxy,
        clock: ClockShift,
    },
    /// One MariaDB server, reached through a proxy, on a clock the nemesis
    /// can step.
    Mysql {
        server: MysqlServer,
        proxy: DelayProxy,
        clock: ClockShift,
    },
}

/// The stores a campaign runs on, by name.
pub const STORES: [&str; 8] = [
    "redis",
    "sentinel",
    "cluster",
    "redlock",
    "etcd",
    "zookeeper",
    "postgres",
    "mysql",
];

impl Deployment {
    async fn start(store: &str) -> Self {
        match store {
            "redis" => {
                let clock = ClockShift::new();
                let server = RedisServer::options().launcher(clock.launcher()).start();
                let proxy = DelayProxy::start(server.port()).await;
                Deployment::Redis {
                    server,
                    proxy,
                    clock,
                }
            }
            "sentinel" => {
                let set = blocking(|| SentinelSet::start(1, 3)).await;
                set.settled().await;
                Deployment::Sentinel(set)
            }
            "cluster" => {
                let cluster = blocking(ClusterSet::start).await;
                cluster.settled().await;
                Deployment::Cluster(cluster, 0)
            }
            "redlock" => {
                let clocks: Vec<ClockShift> = (0..3).map(|_| ClockShift::new()).collect();
                let servers: Vec<RedisServer> = clocks
                    .iter()
                    .map(|clock| RedisServer::options().launcher(clock.launcher()).start())
                    .collect();
                let mut proxies = Vec::new();
                for server in &servers {
                    proxies.push(DelayProxy::start(server.port()).await);
                }
                Deployment::RedLock {
                    servers,
                    proxies,
                    clocks,
                }
            }
            "etcd" => Deployment::Etcd(blocking(|| EtcdServer::cluster(3)).await),
            "zookeeper" => Deployment::ZooKeeper(blocking(|| ZooKeeperServer::ensemble(3)).await),
            "postgres" => {
                let clock = ClockShift::new();
                // Commits durable before they are answered, as
                // docs/guarantees.md asks for tokens that rise across a
                // crash (the kit's default turns it off for speed).
                let server = tokio::task::block_in_place(|| {
                    PostgresServer::start_on_clock(&clock, &["synchronous_commit=on"])
                });
                let proxy = DelayProxy::start(server.port()).await;
                Deployment::Postgres {
                    server,
                    proxy,
                    clock,
                }
            }
            "mysql" => {
                let clock = ClockShift::new();
                let server = tokio::task::block_in_place(|| MysqlServer::start_on_clock(&clock));
                let proxy = DelayProxy::start(server.port()).await;
                Deployment::Mysql {
                    server,
                    proxy,
                    clock,
                }
            }
            other => panic!("no campaign store {other:?}: one of {STORES:?}"),
        }
    }

    /// The clients' lease: what the store's failover needs to stay within.
    fn ttl(&self) -> Duration {
        match self {
            Deployment::Redis { .. }
            | Deployment::RedLock { .. }
            | Deployment::Postgres { .. }
            | Deployment::Mysql { .. }
            | Deployment::Cluster(..) => Duration::from_secs(1),
            Deployment::Sentinel(_) | Deployment::Etcd(_) | Deployment::ZooKeeper(_) => {
                Duration::from_secs(2)
            }
        }
    }

    /// The URL the clients lock through (for RedLock, the client's own
    /// `redlock:<url>,<url>,...`).
    fn url(&self) -> String {
        match self {
            Deployment::Redis { proxy, .. } => proxy.url(),
            Deployment::RedLock { proxies, .. } => {
                let urls: Vec<String> = proxies.iter().map(DelayProxy::url).collect();
                format!("redlock:{}", urls.join(","))
            }
            Deployment::Sentinel(set) => set.url(),
            Deployment::Cluster(cluster, _) => cluster.url(),
            Deployment::Etcd(members) => EtcdServer::url(members),
            Deployment::ZooKeeper(members) => ZooKeeperServer::url(members),
            Deployment::Postgres { proxy, .. } => {
                format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port())
            }
            Deployment::Mysql { proxy, .. } => format!(
                "mysql://root@127.0.0.1:{}/{}",
                proxy.port(),
                lock_testkit::MYSQL_DATABASE
            ),
        }
    }

    /// The kinds of lock the clients take: RedLock keeps the plain lock only.
    fn kinds(&self) -> &'static str {
        match self {
            Deployment::RedLock { .. } => "plain",
            _ => "all",
        }
    }

    fn members(&self) -> usize {
        match self {
            Deployment::Redis { .. } | Deployment::Postgres { .. } | Deployment::Mysql { .. } => 1,
            Deployment::RedLock { servers, .. } => servers.len(),
            Deployment::Sentinel(set) => set.sentinels(),
            Deployment::Cluster(..) => KEYS as usize,
            Deployment::Etcd(members) => members.len(),
            Deployment::ZooKeeper(members) => members.len(),
        }
    }

    /// What the nemesis may do here. etcd (Go reads the clock without the
    /// C library) and ZooKeeper (sessions on the JVM's monotonic clock) take
    /// no clock steps; their clients connect to every member, so a cut is a
    /// member's kill. Sentinel and Cluster take their own failovers, and
    /// Sentinel's sentinels and Cluster's replicas are killed. A cut on
    /// RedLock cuts every server off.
    fn menu(&self) -> Menu {
        use FaultKind::*;
        let mut kinds = vec![Quiet, PauseClient, KillClient];
        match self {
            Deployment::Redis { .. }
            | Deployment::RedLock { .. }
            | Deployment::Postgres { .. }
            | Deployment::Mysql { .. } => {
                kinds.extend([PauseMember, KillMember, Cut, ClockJump]);
            }
            Deployment::Etcd(_) | Deployment::ZooKeeper(_) => {
                kinds.extend([PauseMember, KillMember]);
            }
            // A sentinel frozen 2 s or more goes into TILT for 30 s and
            // takes no failover: killed, not frozen.
            Deployment::Sentinel(_) => kinds.extend([KillMember, Failover]),
            // A master killed is a failover that may lose acknowledged
            // locks (the documented limit of Redis replication); replicas
            // are killed.
            Deployment::Cluster(..) => kinds.extend([KillMember, Failover]),
        }
        Menu {
            clients: CLIENTS,
            members: self.members(),
            kinds,
            ttl: self.ttl(),
            restart_forgets: matches!(self, Deployment::Redis { .. } | Deployment::RedLock { .. }),
            operator_keys: KEYS,
        }
    }

    fn pids(&self, member: usize) -> Vec<u32> {
        match self {
            Deployment::Redis { server, .. } => server.pid().into_iter().collect(),
            Deployment::RedLock { servers, .. } => servers[member].pid().into_iter().collect(),
            Deployment::Sentinel(set) => set.sentinel_pid(member).into_iter().collect(),
            Deployment::Etcd(members) => members[member].pid().into_iter().collect(),
            Deployment::ZooKeeper(members) => members[member].pid().into_iter().collect(),
            Deployment::Postgres { server, .. } => server.pids(),
            Deployment::Mysql { server, .. } => server.pid().into_iter().collect(),
            Deployment::Cluster(..) => unreachable!("not on the menu"),
        }
    }

    fn kill(&mut self, member: usize) {
        match self {
            Deployment::Redis { server, .. } => server.kill(),
            Deployment::RedLock { servers, .. } => servers[member].kill(),
            Deployment::Sentinel(set) => set.kill_sentinel(member),
            Deployment::Etcd(members) => members[member].kill(),
            Deployment::ZooKeeper(members) => members[member].kill(),
            // Killed and started at once, recovering from its WAL.
            Deployment::Postgres { server, .. } => server.crash_and_restart(),
            // Killed and started at once, recovering from its redo log.
            Deployment::Mysql { server, .. } => server.crash_and_restart(),
            Deployment::Cluster(..) => unreachable!("killed in `apply`"),
        }
    }

    async fn restart(&mut self, member: usize) {
        match self {
            Deployment::Redis { server, .. } => server.restart(),
            Deployment::RedLock { servers, .. } => servers[member].restart(),
            Deployment::Sentinel(set) => set.restart_sentinel(member).await,
            Deployment::Etcd(members) => members[member].restart(),
            Deployment::ZooKeeper(members) => members[member].restart(),
            Deployment::Postgres { .. } | Deployment::Mysql { .. } => {}
            Deployment::Cluster(..) => unreachable!("killed in `apply`"),
        }
    }

    fn proxies(&self) -> Vec<&DelayProxy> {
        match self {
            Deployment::Redis { proxy, .. }
            | Deployment::Postgres { proxy, .. }
            | Deployment::Mysql { proxy, .. } => vec![proxy],
            Deployment::RedLock { proxies, .. } => proxies.iter().collect(),
            _ => Vec::new(),
        }
    }

    fn clock(&self, member: usize) -> Option<&ClockShift> {
        match self {
            Deployment::Redis { clock, .. }
            | Deployment::Postgres { clock, .. }
            | Deployment::Mysql { clock, .. } => Some(clock),
            Deployment::RedLock { clocks, .. } => clocks.get(member),
            _ => None,
        }
    }

    /// What the store still keeps of any lock: nothing, once every lease
    /// ended.
    async fn leftover(&self) -> Vec<String> {
        match self {
            Deployment::Redis { server, .. } => {
                // Token records lapse on their own, 10 s past their token.
                lasting_keys(&mut server.connection().await).await
            }
            Deployment::RedLock { servers, .. } => {
                let mut left = Vec::new();
                for server in servers {
                    left.extend(lasting_keys(&mut server.connection().await).await);
                }
                left
            }
            Deployment::Sentinel(set) => {
                let master = set.server(set.master_port().await);
                lasting_keys(&mut master.connection().await).await
            }
            Deployment::Cluster(cluster, _) => {
                let mut left = Vec::new();
                for key in 0..KEYS {
                    let master = cluster.master_of(&format!("k{key}")).await;
                    left.extend(lasting_keys(&mut master.connection().await).await);
                }
                left.sort();
                left.dedup();
                left
            }
            Deployment::Etcd(members) => lock_testkit::etcd_keys(&members[0]).await,
            Deployment::ZooKeeper(members) => {
                let client = lock_testkit::zookeeper_client(&members[0]).await;
                let mut left = Vec::new();
                let top = client.list_children("/").await.unwrap_or_default();
                for parent in top.iter().filter(|name| *name != "zookeeper") {
                    let path = format!("/{parent}");
                    for child in client.list_children(&path).await.unwrap_or_default() {
                        left.push(format!("{path}/{child}"));
                    }
                }
                left
            }
            Deployment::Postgres { server, .. } => lock_testkit::postgres_live_leases(server).await,
            Deployment::Mysql { server, .. } => {
                tokio::task::block_in_place(|| lock_testkit::mysql_live_leases(server))
            }
        }
    }
}

/// What one campaign ran and found.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub steps: usize,
    pub acquisitions: usize,
    pub accepted: usize,
    pub rejected: usize,
    pub lost: usize,
    pub faults: BTreeMap<String, usize>,
    pub violations: Vec<String>,
}

/// A client process running `campaign_client`, as `id`.
fn spawn(clients: &mut Clients, deployment: &Deployment, data: &RedisServer, id: &str, seed: u64) {
    let args = [
        deployment.url(),
        data.url(),
        id.to_owned(),
        seed.to_string(),
        TASKS.to_string(),
        KEYS.to_string(),
        deployment.ttl().as_millis().to_string(),
        deployment.kinds().to_owned(),
    ];
    clients.spawn_program(env!("CARGO_BIN_EXE_campaign_client"), id, &args, &[]);
}

/// An operator beside the clients: its own Locker, and what it did and saw
/// as history events (client `op`).
struct Operator {
    locker: Locker,
    events: Vec<Event>,
}

impl Operator {
    /// Connected as the clients are (the store is up at the start).
    async fn of(deployment: &Deployment) -> Self {
        let ttl = deployment.ttl();
        let builder = Locker::builder().ttl(ttl).timeout(ttl / 2);
        let url = deployment.url();
        let locker = match url.strip_prefix("redlock:") {
            Some(urls) => builder.redlock(&urls.split(',').collect::<Vec<_>>()).await,
            None => builder.connect(&url).await,
        };
        Operator {
            locker: locker.expect("the operator connects"),
            events: Vec::new(),
        }
    }

    fn emit(&mut self, at: u64, kind: &str, key: String, token: u64) {
        self.events.push(Event {
            at,
            client: "op".to_owned(),
            kind: kind.to_owned(),
            key,
            token,
        });
    }

    /// `force_sent`, then `force_ok` with the token it removed up to (or
    /// `force_failed`: it may have removed all or nothing).
    async fn force_release(&mut self, key: u64) {
        let key = format!("k{key}");
        self.emit(now_ms(), "force_sent", key.clone(), 0);
        match self.locker.force_release(&key).await {
            Ok(forced) => {
                let up_to = forced.tokens_up_to.map_or(0, |t| t.get());
                self.emit(now_ms(), "force_ok", key, up_to);
            }
            Err(_) => self.emit(now_ms(), "force_failed", key, 0),
        }
    }

    /// One `inspect_seen` per holder, named `<kind>.<key>` as the clients
    /// name their locks.
    async fn inspect(&mut self, key: u64) {
        let Ok(seen) = self.locker.inspect(&format!("k{key}")).await else {
            return;
        };
        let at = now_ms();
        for holder in seen.holders {
            let kind = match holder.kind {
                LockKind::Exclusive => "plain",
                LockKind::Fair => "fair",
                LockKind::Read => "read",
                LockKind::Write => "write",
                LockKind::Permit { .. } => "permit",
                LockKind::Segment { .. } => "segment",
                _ => "other",
            };
            self.emit(
                at,
                "inspect_seen",
                format!("{kind}.k{key}"),
                holder.token.get(),
            );
        }
    }
}

/// Applies one fault and heals it; returns when it is over.
async fn apply(
    fault: &Fault,
    deployment: &mut Deployment,
    clients: &mut Clients,
    data: &RedisServer,
    names: &mut [String],
    seed: u64,
    operator: &mut Operator,
) {
    match fault {
        Fault::ForceRelease { key } => operator.force_release(*key).await,
        Fault::Inspect { key } => operator.inspect(*key).await,
        Fault::Quiet(lasting) => tokio::time::sleep(*lasting).await,
        Fault::PauseClient { client, lasting } => {
            let since = clients.stop(&names[*client]);
            tokio::time::sleep(*lasting).await;
            clients.cont(&names[*client], since);
        }
        Fault::KillClient { client } => {
            clients.kill(&names[*client]);
            let next = format!("{}r", names[*client]);
            spawn(clients, deployment, data, &next, seed);
            names[*client] = next;
        }
        Fault::PauseMember { member, lasting } => {
            let pids = deployment.pids(*member);
            for &pid in &pids {
                send_signal(pid, libc::SIGSTOP);
            }
            tokio::time::sleep(*lasting).await;
            for &pid in &pids {
                send_signal(pid, libc::SIGCONT);
            }
        }
        Fault::KillMember { member, down } => match deployment {
            Deployment::Cluster(cluster, _) => {
                cluster.kill_replica_of(&format!("k{member}"), *down).await;
            }
            _ => {
                deployment.kill(*member);
                tokio::time::sleep(*down).await;
                deployment.restart(*member).await;
            }
        },
        Fault::Cut { lasting } => {
            let proxies = deployment.proxies();
            assert!(!proxies.is_empty(), "a cut needs a proxy");
            proxies.iter().for_each(|proxy| proxy.cut());
            tokio::time::sleep(*lasting).await;
            proxies.iter().for_each(|proxy| proxy.heal());
        }
        Fault::ClockJump {
            member,
            ms,
            lasting,
        } => {
            let clock = deployment
                .clock(*member)
                .expect("a clock step needs the shim");
            clock.set_ms(*ms);
            tokio::time::sleep(*lasting).await;
            clock.set_ms(0);
        }
        Fault::Failover => match deployment {
            Deployment::Sentinel(set) => {
                set.failover().await;
            }
            // The master of each key in turn.
            Deployment::Cluster(cluster, failovers) => {
                cluster.fail_over(&format!("k{}", *failovers % KEYS)).await;
                *failovers += 1;
            }
            _ => unreachable!("not on this store's menu"),
        },
    }
}

/// Runs the campaign of `seed` on `store`, checks it, and returns what it
/// ran and found (violations included, with their windows).
pub async fn campaign(seed: u64, store: &str) -> Report {
    let mut deployment = Deployment::start(store).await;
    let data = RedisServer::start();
    let ttl = deployment.ttl();
    let steps = schedule(seed, &deployment.menu(), LENGTH);
    let mut clients = Clients::new();
    let mut names: Vec<String> = (0..CLIENTS).map(|i| format!("c{i}")).collect();
    for name in &names {
        spawn(&mut clients, &deployment, &data, name, seed);
    }
    let mut ready = 0;
    while ready < CLIENTS {
        if clients.next().kind == "ready" {
            ready += 1;
        }
    }
    let mut report = Report {
        steps: steps.len(),
        ..Report::default()
    };
    let mut operator = Operator::of(&deployment).await;
    let mut faults = Vec::new();
    for step in &steps {
        tokio::time::sleep(step.gap).await;
        let began = now_ms();
        apply(
            &step.fault,
            &mut deployment,
            &mut clients,
            &data,
            &mut names,
            seed,
            &mut operator,
        )
        .await;
        // What can explain a lost lease (an operator's steps are events).
        let kind = step.fault.kind();
        if ![
            FaultKind::Quiet,
            FaultKind::ForceRelease,
            FaultKind::Inspect,
        ]
        .contains(&kind)
        {
            faults.push((began, now_ms()));
        }
        clients.drain();
        *report
            .faults
            .entry(format!("{:?}", step.fault.kind()))
            .or_default() += 1;
    }
    let healed = now_ms();
    for id in clients.ids() {
        clients.say(&id, "settle");
    }
    let (mut events, pauses) = blocking(move || clients.finish()).await;
    events.append(&mut operator.events);
    events.sort_by_key(|e| e.at);

    // Nothing left within 2 x ttl of the end (every lease ends by then),
    // plus the longest forward clock step: what a store wrote while its
    // clock was ahead expires by that clock, so that much later once the
    // clock is back (docs/guarantees.md, "Clocks").
    let ahead = steps
        .iter()
        .filter_map(|step| match step.fault {
            Fault::ClockJump { ms, .. } if ms > 0 => Some(Duration::from_millis(ms as u64)),
            _ => None,
        })
        .max()
        .unwrap_or_default();
    let deadline = Instant::now() + 2 * ttl + SLACK + ahead;
    let mut left = deployment.leftover().await;
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = deployment.leftover().await;
    }
    let names = NAMES
        .iter()
        .flat_map(|kind| (0..KEYS).map(move |key| format!("{kind}.k{key}")));
    let lists = history_lists(&data, names).await;
    let facts = Facts {
        ttl,
        pauses,
        store: lists,
        slack: SLACK,
        faults,
    };
    let mut violations = match check_campaign(&events, &facts) {
        Ok(summary) => {
            report.acquisitions = summary.acquired;
            report.accepted = summary.accepted;
            report.rejected = summary.rejected;
            report.lost = summary.lost;
            Vec::new()
        }
        Err(found) => found,
    };
    if !left.is_empty() {
        violations.push(Violation {
            at: healed,
            key: String::new(),
            text: format!(
                "left in the store {} ms after the faults: {left:?}",
                now_ms() - healed
            ),
        });
    }
    report.violations = violations
        .iter()
        .map(|v| describe(v, &events, ttl))
        .collect();
    if !report.violations.is_empty() {
        let steps: Vec<String> = steps.iter().map(Step::to_string).collect();
        // The whole history beside the windows, for what they leave out.
        let path = std::env::temp_dir().join(format!("nemesis-{store}-{seed}.history"));
        let lines: Vec<String> = events
            .iter()
            .map(|e| format!("{} {} {} {} {}", e.at, e.client, e.kind, e.key, e.token))
            .collect();
        let _ = std::fs::write(&path, lines.join("\n"));
        eprintln!(
            "campaign seed {seed} on {store}: {} violations\nsteps:\n  {}\n\n{}\nthe whole history: {}\nreplay: scripts/nemesis --seed {seed} --store {store}",
            report.violations.len(),
            steps.join("\n  "),
            report.violations.join("\n\n"),
            path.display(),
        );
    }
    report
}

/// A violation with the window of the history that shows it.
fn describe(violation: &Violation, events: &[Event], ttl: Duration) -> String {
    let lines: Vec<String> = window(events, violation, ttl)
        .iter()
        .map(|e| format!("    {} {} {} {} {}", e.at, e.client, e.kind, e.key, e.token))
        .collect();
    format!("- {}\n{}", violation.text, lines.join("\n"))
}

/// The fixed seeds CI runs on `store`: two per store. On Redis, seed 2
/// catches token records kept too briefly for a clock step back (it found
/// that bug), and seed 3294514649 steps the clock back 3.3 s, then forward
/// 7.4 s before a cut: a fair queue entry written then outlived 2 x ttl.
/// On PostgreSQL, seed 3705654218 crashes the server with its clock stepped:
/// with asynchronous commit (the kit's default) it found tokens reused. On
/// etcd, seeds 2520595464 and 1 freeze a member, which applied an acquire
/// after its undo until undone acquires left a mark (about one run in four).
/// On RedLock, seed 4 kills two servers (each comes back empty) and steps
/// a clock; seed 1 cuts all three and freezes one. On MySQL, seed 1 cuts
/// the clients off and freezes the server, seed 2 steps its clock and
/// freezes it twice (seed 4, which crashes it twice, is left out: in two
/// runs of four every client then failed with an EOF through the proxy,
/// not yet understood).
fn ci_seeds(store: &str) -> [u64; 2] {
    match store {
        "redis" => [2, 3_294_514_649],
        "redlock" => [1, 4],
        "etcd" => [1, 2_520_595_464],
        "postgres" => [1, 3_705_654_218],
        _ => [1, 2],
    }
}

/// Runs the fixed seeds on `store` (or the one `NEMESIS_SEED` names) and
/// fails on any violation.
async fn fixed_seeds(store: &str) {
    let _one_at_a_time = one_at_a_time().await;
    let seeds: Vec<u64> = match std::env::var("NEMESIS_SEED") {
        Ok(seed) => vec![seed.parse().expect("NEMESIS_SEED is a number")],
        Err(_) => ci_seeds(store).to_vec(),
    };
    for seed in seeds {
        let report = campaign(seed, store).await;
        println!(
            "seed {seed} on {store}: {} steps, {} acquisitions, {} writes accepted, {} refused, {} losses told; faults {:?}",
            report.steps,
            report.acquisitions,
            report.accepted,
            report.rejected,
            report.lost,
            report.faults
        );
        assert!(
            report.violations.is_empty(),
            "seed {seed} on {store}: {} violations (above)",
            report.violations.len()
        );
        assert!(
            report.acquisitions > 0,
            "seed {seed} on {store}: nothing was locked"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_redis() {
    fixed_seeds("redis").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_sentinel() {
    fixed_seeds("sentinel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_cluster() {
    fixed_seeds("cluster").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_redlock() {
    fixed_seeds("redlock").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_etcd() {
    fixed_seeds("etcd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_zookeeper() {
    fixed_seeds("zookeeper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_postgres() {
    fixed_seeds("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn campaign_mysql() {
    fixed_seeds("mysql").await;
}

/// New seeds for `NEMESIS_MINUTES` minutes on every store (or
/// `NEMESIS_STORE`), one row per store: run by `scripts/nemesis --minutes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "on demand: scripts/nemesis --minutes M"]
async fn campaign_on_demand() {
    let minutes: f64 = std::env::var("NEMESIS_MINUTES")
        .map(|m| m.parse().expect("NEMESIS_MINUTES is a number"))
        .unwrap_or(1.0);
    let stores: Vec<String> = match std::env::var("NEMESIS_STORE") {
        Ok(store) => vec![store],
        Err(_) => STORES.iter().map(|s| (*s).to_owned()).collect(),
    };
    let until = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    let mut totals: BTreeMap<String, (usize, Report)> = BTreeMap::new();
    let mut failing = Vec::new();
    'outer: loop {
        for store in &stores {
            if Instant::now() >= until {
                break 'outer;
            }
            let seed = rand::random::<u32>() as u64;
            // A kit failure (a failover that never came) ends that
            // schedule, not the run; its servers stop as it unwinds.
            let run = std::panic::AssertUnwindSafe(campaign(seed, store));
            let report = match futures_util::FutureExt::catch_unwind(run).await {
                Ok(report) => report,
                Err(_) => {
                    failing.push(format!("{store} seed {seed}: the kit failed (above)"));
                    continue;
                }
            };
            if !report.violations.is_empty() {
                failing.push(format!("{store} seed {seed}"));
            }
            let (schedules, total) = totals.entry(store.clone()).or_default();
            *schedules += 1;
            total.steps += report.steps;
            total.acquisitions += report.acquisitions;
            total.violations.extend(report.violations);
            for (kind, n) in report.faults {
                *total.faults.entry(kind).or_default() += n;
            }
        }
    }
    println!("| store | schedules | steps | acquisitions | faults by type | violations |");
    println!("|---|---|---|---|---|---|");
    for (store, (schedules, total)) in &totals {
        let faults: Vec<String> = total
            .faults
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        println!(
            "| {store} | {schedules} | {} | {} | {} | {} |",
            total.steps,
            total.acquisitions,
            faults.join(", "),
            total.violations.len()
        );
    }
    assert!(failing.is_empty(), "failing seeds: {failing:?}");
}
