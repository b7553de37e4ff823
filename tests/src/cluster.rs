//! [`ClusterSet`]: a Redis Cluster of 3 masters and 3 replicas, on free
//! loopback ports and owned by a test.

use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use crate::{RedisServer, ServerOptions};

/// Bound on the kit's waits for the cluster (to form, to fail over).
const SETTLE: Duration = Duration::from_secs(30);

/// A Redis Cluster: every node is killed when the set is dropped, also
/// when a test panics.
pub struct ClusterSet {
    nodes: Vec<RedisServer>,
}

impl ClusterSet {
    /// Starts 6 nodes and joins them (`redis-cli --cluster create`, one
    /// replica per master), then waits until every node says the cluster is
    /// ok (blocking: it is made before a test's first await).
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| ServerOptions::default().cluster().start())
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let status = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        let set = ClusterSet { nodes };
        let deadline = std::time::Instant::now() + SETTLE;
        for node in &set.nodes {
            let mut conn = node.client().get_connection().expect("connect to a node");
            while !cluster_ok(&mut conn) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the cluster did not form within {SETTLE:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        set
    }

    /// `redis+cluster://127.0.0.1:<port>,...` over every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// Every node's `redis://` URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Every node.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Waits until every node reports `cluster_state:ok` and knows its
    /// role (polled: the cluster bus has no event the kit can follow).
    pub async fn settled(&self) {
        let deadline = Instant::now() + SETTLE;
        for node in &self.nodes {
            let mut conn = node.connection().await;
            loop {
                let info: String = redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query_async(&mut conn)
                    .await
                    .expect("CLUSTER INFO");
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the cluster did not form within {SETTLE:?}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// The master that serves `key` (the stored key, hash tag included).
    pub async fn master_of(&self, key: &str) -> &RedisServer {
        let port = self.master_port_of(key).await;
        self.node(port)
    }

    async fn master_port_of(&self, key: &str) -> u16 {
        let mut conn = self.nodes[0].connection().await;
        let slot: u16 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("CLUSTER KEYSLOT");
        // [[start, end, [ip, port, id], replicas...], ...]
        let ranges: Vec<(u16, u16, (String, u16))> = {
            let raw: Vec<redis::Value> = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut conn)
                .await
                .expect("CLUSTER SLOTS");
            raw.into_iter()
                .map(|range| {
                    let redis::Value::Array(parts) = range else {
                        panic!("CLUSTER SLOTS: {range:?}");
                    };
                    let start = redis::from_redis_value(parts[0].clone()).expect("start");
                    let end = redis::from_redis_value(parts[1].clone()).expect("end");
                    let redis::Value::Array(master) = parts[2].clone() else {
                        panic!("CLUSTER SLOTS master: {:?}", parts[2]);
                    };
                    let ip = redis::from_redis_value(master[0].clone()).expect("ip");
                    let port = redis::from_redis_value(master[1].clone()).expect("port");
                    (start, end, (ip, port))
                })
                .collect()
        };
        let found = ranges
            .iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot));
        found
            .map(|(_, _, (_, port))| *port)
            .expect("a master for the slot")
    }

    /// The node listening on `port`.
    pub fn node(&self, port: u16) -> &RedisServer {
        let found = self.nodes.iter().find(|n| n.port() == port);
        found.unwrap_or_else(|| panic!("no node of the cluster on port {port}"))
    }

    /// Moves the slot of `key` to another master while the cluster runs:
    /// `IMPORTING` on the target, `MIGRATING` on the source, `MIGRATE` of
    /// every key of the slot, then `SETSLOT ... NODE` on every master.
    /// `between` runs once the slot is half-moved (both marks set, keys
    /// not yet moved). Returns the new master's port.
    pub async fn migrate_slot<F: std::future::Future<Output = ()>>(
        &self,
        key: &str,
        between: F,
    ) -> u16 {
        let from = self.master_port_of(key).await;
        let masters = self.master_ports().await;
        let to = *masters
            .iter()
            .find(|&&p| p != from)
            .expect("another master");
        let mut source = self.node(from).connection().await;
        let mut target = self.node(to).connection().await;
        let slot: u16 = cluster_cmd(&mut source, &["KEYSLOT", key]).await;
        let source_id: String = cluster_cmd(&mut source, &["MYID"]).await;
        let target_id: String = cluster_cmd(&mut target, &["MYID"]).await;
        let slot = slot.to_string();
        let _: () = cluster_cmd(&mut target, &["SETSLOT", &slot, "IMPORTING", &source_id]).await;
        let _: () = cluster_cmd(&mut source, &["SETSLOT", &slot, "MIGRATING", &target_id]).await;
        between.await;
        loop {
            let keys: Vec<String> =
                cluster_cmd(&mut source, &["GETKEYSINSLOT", &slot, "100"]).await;
            if keys.is_empty() {
                break;
            }
            let _: () = redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .query_async(&mut source)
                .await
                .expect("MIGRATE");
        }
        for port in masters {
            let mut conn = self.node(port).connection().await;
            let _: () = cluster_cmd(&mut conn, &["SETSLOT", &slot, "NODE", &target_id]).await;
        }
        let deadline = Instant::now() + SETTLE;
        while self.master_port_of(key).await != to {
            assert!(
                Instant::now() < deadline,
                "the slot did not move within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        to
    }

    /// The ports of the masters.
    pub async fn master_ports(&self) -> Vec<u16> {
        let mut ports = Vec::new();
        for node in &self.nodes {
            let mut conn = node.connection().await;
            let role: Vec<redis::Value> = redis::cmd("ROLE")
                .query_async(&mut conn)
                .await
                .expect("ROLE");
            if matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master") {
                ports.push(node.port());
            }
        }
        ports
    }

    /// Kills the replica of the master serving `key` (SIGKILL), and after
    /// `down` starts it again on its port: it rejoins as a replica from its
    /// `nodes.conf`, empty (no persistence), and syncs again. Returns once
    /// every node says the cluster is ok.
    pub async fn kill_replica_of(&mut self, key: &str, down: Duration) {
        let port = self.replica_port_of(key).await;
        let at = self.nodes.iter().position(|n| n.port() == port);
        let at = at.expect("a node of the cluster");
        self.nodes[at].kill();
        tokio::time::sleep(down).await;
        self.nodes[at].restart();
        self.settled().await;
    }

    /// A replica of the master serving `key`, once it has attached and
    /// caught up.
    pub async fn replica_of(&self, key: &str) -> &RedisServer {
        let port = self.replica_port_of(key).await;
        self.node(port)
    }

    async fn replica_port_of(&self, key: &str) -> u16 {
        let mut master = self.master_of(key).await.connection().await;
        let id: String = redis::cmd("CLUSTER")
            .arg("MYID")
            .query_async(&mut master)
            .await
            .expect("CLUSTER MYID");
        // A replica is known once it has attached (polled, as above).
        let deadline = Instant::now() + SETTLE;
        let line = loop {
            let replicas: Vec<String> = redis::cmd("CLUSTER")
                .arg("REPLICAS")
                .arg(&id)
                .query_async(&mut master)
                .await
                .expect("CLUSTER REPLICAS");
            if let Some(line) = replicas.into_iter().find(|l| l.contains("connected")) {
                break line;
            }
            assert!(Instant::now() < deadline, "the master has no replica");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Caught up: `WAIT` on a connection that wrote nothing returns
        // once a replica is online.
        let synced: usize = redis::cmd("WAIT")
            .arg(1)
            .arg(SETTLE.as_millis() as u64)
            .query_async(&mut master)
            .await
            .expect("WAIT");
        assert_eq!(synced, 1, "the replica did not sync within {SETTLE:?}");
        // `<id> <ip>:<port>@<bus-port> ...`
        let address = line.split(' ').nth(1).expect("an address").to_owned();
        address
            .split(['@', ':'])
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("a port")
    }

    /// Has a replica of the master serving `key` take over
    /// (`CLUSTER FAILOVER`, which waits for it to catch up), and returns
    /// the new master's port once every node routes the slot there.
    pub async fn fail_over(&self, key: &str) -> u16 {
        let port = self.replica_port_of(key).await;
        let mut replica = self.node(port).connection().await;
        let deadline = Instant::now() + SETTLE;
        // A manual failover the master does not agree to within its
        // timeout (5 s) is dropped: ask again without its agreement (FORCE:
        // the other masters' votes suffice), then without votes (TAKEOVER).
        let mut asked_before = 0;
        'ask: loop {
            let mut failover = redis::cmd("CLUSTER");
            failover.arg("FAILOVER");
            let how = ["", "FORCE", "TAKEOVER"][asked_before.min(2)];
            if !how.is_empty() {
                failover.arg(how);
            }
            asked_before += 1;
            let _: () = failover
                .query_async(&mut replica)
                .await
                .expect("CLUSTER FAILOVER");
            let asked = Instant::now();
            while self.master_port_of(key).await != port {
                assert!(Instant::now() < deadline, "no failover within {SETTLE:?}");
                if asked.elapsed() > Duration::from_secs(6) {
                    continue 'ask;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            break;
        }
        self.settled().await;
        port
    }
}

/// Whether the node behind `conn` says the cluster is ok.
fn cluster_ok(conn: &mut redis::Connection) -> bool {
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(conn)
        .expect("CLUSTER INFO");
    info.contains("cluster_state:ok")
}

/// `CLUSTER <args...>` on `conn`.
async fn cluster_cmd<T: redis::FromRedisValue>(
    conn: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> T {
    redis::cmd("CLUSTER")
        .arg(args)
        .query_async(conn)
        .await
        .unwrap_or_else(|err| panic!("CLUSTER {args:?}: {err}"))
}
