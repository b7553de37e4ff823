//! [`SentinelSet`]: a master, its replicas and the sentinels that watch
//! them (as `mymaster`), all on free loopback ports and owned by a test.

use std::process::{Child, Command};
use std::time::Duration;

use tempfile::TempDir;
use tokio::time::Instant;

use crate::free_port;
use crate::server::spawn_until;
use crate::{RedisServer, ServerOptions};

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "mymaster";

/// How long a master may be unreachable before the sentinels call it down.
const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// Bound on the kit's waits for the sentinels (to see the deployment, to
/// finish a failover).
const SETTLE: Duration = Duration::from_secs(30);

/// A Sentinel deployment. Sentinels are stopped before the servers when it
/// is dropped, also when a test panics.
pub struct SentinelSet {
    sentinels: Vec<Sentinel>,
    /// The first was the master when started.
    servers: Vec<RedisServer>,
}

/// One `redis-server --sentinel` process.
struct Sentinel {
    port: u16,
    /// `None` while killed.
    child: Option<Child>,
    /// Its configuration, which it rewrites with what it learns.
    config: std::path::PathBuf,
    _dir: TempDir,
}

impl Sentinel {
    fn start(master_port: u16, quorum: usize) -> Self {
        for _ in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("lock-testkit-sentinel-")
                .tempdir()
                .expect("temp dir");
            let port = free_port();
            let config = dir.path().join("sentinel.conf");
            let millis = DOWN_AFTER.as_millis();
            let text = format!(
                "port {port}\nbind 127.0.0.1\ndir {dir}\nlogfile \"\"\ndaemonize no\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {quorum}\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {millis}\n\
                 sentinel failover-timeout {MASTER_NAME} 5000\n\
                 sentinel parallel-syncs {MASTER_NAME} 2\n",
                dir = dir.path().display(),
            );
            std::fs::write(&config, text).expect("sentinel.conf");
            if let Some(child) = spawn_until(&mut command(&config), "+monitor master") {
                return Sentinel {
                    port,
                    child: Some(child),
                    config,
                    _dir: dir,
                };
            }
        }
        panic!("redis-server --sentinel did not start on any of 5 free ports");
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(format!("redis://127.0.0.1:{}", self.port))
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connect to a sentinel")
    }
}

/// The command that starts a sentinel on `config`.
fn command(config: &std::path::Path) -> Command {
    let mut command = Command::new("redis-server");
    command.arg(config).arg("--sentinel");
    command
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.kill();
    }
}

impl SentinelSet {
    /// A master with `replicas` replicas, watched by `sentinels` sentinels
    /// with a majority quorum. Call [`settled`](Self::settled) before a
    /// failover: the sentinels need a moment to find the replicas and each
    /// other.
    pub fn start(replicas: usize, sentinels: usize) -> Self {
        let master = RedisServer::start();
        let mut servers = vec![];
        for _ in 0..replicas {
            servers.push(ServerOptions::default().replica_of(master.port()).start());
        }
        servers.insert(0, master);
        let quorum = sentinels / 2 + 1;
        let sentinels = (0..sentinels)
            .map(|_| Sentinel::start(servers[0].port(), quorum))
            .collect();
        SentinelSet { sentinels, servers }
    }

    /// `redis+sentinel://127.0.0.1:<port>,.../mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The sentinels' `redis://` URLs.
    pub fn sentinel_urls(&self) -> Vec<String> {
        let url = |s: &Sentinel| format!("redis://127.0.0.1:{}", s.port);
        self.sentinels.iter().map(url).collect()
    }

    /// The server that was master when the set started.
    pub fn first_master(&self) -> &RedisServer {
        &self.servers[0]
    }

    /// The server listening on `port`.
    pub fn server(&self, port: u16) -> &RedisServer {
        let found = self.servers.iter().find(|s| s.port() == port);
        found.unwrap_or_else(|| panic!("no server of the set on port {port}"))
    }

    /// The server listening on `port`, to kill or restart.
    pub fn server_mut(&mut self, port: u16) -> &mut RedisServer {
        let found = self.servers.iter_mut().find(|s| s.port() == port);
        found.unwrap_or_else(|| panic!("no server of the set on port {port}"))
    }

    /// The master's port, as the first sentinel names it.
    pub async fn master_port(&self) -> u16 {
        let mut conn = self.sentinels[0].connection().await;
        let (_, port): (String, u16) = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query_async(&mut conn)
            .await
            .expect("SENTINEL GET-MASTER-ADDR-BY-NAME");
        port
    }

    /// Waits until every replica has synced and every sentinel knows every
    /// replica and every other sentinel (polled: Sentinel learns of them on
    /// its hello channel, which the kit does not follow).
    pub async fn settled(&self) {
        let replicas = self.servers.len() - 1;
        self.first_master().wait_for_replicas(replicas).await;
        for sentinel in &self.sentinels {
            self.knows_all(sentinel).await;
        }
    }

    /// Waits until `sentinel` knows every replica and every other sentinel.
    async fn knows_all(&self, sentinel: &Sentinel) {
        let (replicas, others) = (self.servers.len() - 1, self.sentinels.len() - 1);
        let deadline = Instant::now() + SETTLE;
        let mut conn = sentinel.connection().await;
        while known(&mut conn, "REPLICAS").await != replicas
            || known(&mut conn, "SENTINELS").await != others
        {
            assert!(
                Instant::now() < deadline,
                "the sentinels did not settle within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// How many sentinels watch.
    pub fn sentinels(&self) -> usize {
        self.sentinels.len()
    }

    /// The process id of sentinel `i`, while it runs.
    pub fn sentinel_pid(&self, i: usize) -> Option<u32> {
        self.sentinels[i].child.as_ref().map(Child::id)
    }

    /// Kills sentinel `i` (SIGKILL).
    pub fn kill_sentinel(&mut self, i: usize) {
        self.sentinels[i].kill();
    }

    /// Starts sentinel `i` again on its port, with the configuration it
    /// rewrote (which names the replica and the other sentinels, so it
    /// knows them at once; [`failover`](Self::failover) asks another
    /// sentinel while it cannot reach the replica yet).
    pub async fn restart_sentinel(&mut self, i: usize) {
        let sentinel = &mut self.sentinels[i];
        sentinel.kill();
        let child = spawn_until(&mut command(&sentinel.config), "+monitor master");
        sentinel.child = Some(child.expect("a sentinel restarts on its port"));
        self.knows_all(&self.sentinels[i]).await;
    }

    /// Has the sentinels fail over (`SENTINEL FAILOVER`), and returns the
    /// new master's port once every sentinel names it and it answers as
    /// master.
    pub async fn failover(&self) -> u16 {
        let old = self.master_port().await;
        let deadline = Instant::now() + SETTLE;
        // A sentinel just restarted may not reach the replica yet
        // (NOGOODSLAVE): the next one is asked, and the round again.
        'asked: loop {
            for sentinel in self.sentinels.iter().filter(|s| s.child.is_some()) {
                let mut conn = sentinel.connection().await;
                let asked: redis::RedisResult<()> = redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(MASTER_NAME)
                    .query_async(&mut conn)
                    .await;
                if asked.is_ok() {
                    break 'asked;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no sentinel took a failover within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.new_master(old).await
    }

    /// Waits until every sentinel names a master other than the one on
    /// `old`, and that server answers as master; returns its port.
    pub async fn new_master(&self, old: u16) -> u16 {
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(port) = self.agreed_master().await
                && port != old
                && self.is_master(port).await
            {
                return port;
            }
            assert!(Instant::now() < deadline, "no new master within {SETTLE:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The master's port if every sentinel names the same one.
    async fn agreed_master(&self) -> Option<u16> {
        let mut agreed = None;
        for sentinel in &self.sentinels {
            let mut conn = sentinel.connection().await;
            let named: Option<(String, u16)> = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(MASTER_NAME)
                .query_async(&mut conn)
                .await
                .ok();
            let port = named?.1;
            if agreed.is_some_and(|p| p != port) {
                return None;
            }
            agreed = Some(port);
        }
        agreed
    }

    async fn is_master(&self, port: u16) -> bool {
        let Some(server) = self.servers.iter().find(|s| s.port() == port) else {
            return false;
        };
        let Ok(mut conn) = server.client().get_multiplexed_async_connection().await else {
            return false;
        };
        let role: redis::RedisResult<Vec<redis::Value>> =
            redis::cmd("ROLE").query_async(&mut conn).await;
        matches!(role.as_deref(), Ok([redis::Value::BulkString(r), ..]) if r == b"master")
    }
}

/// How many `what` (`REPLICAS`, `SENTINELS`) a sentinel knows of the master.
async fn known(sentinel: &mut redis::aio::MultiplexedConnection, what: &str) -> usize {
    let found: Vec<redis::Value> = redis::cmd("SENTINEL")
        .arg(what)
        .arg(MASTER_NAME)
        .query_async(sentinel)
        .await
        .expect("SENTINEL REPLICAS/SENTINELS");
    found.len()
}
