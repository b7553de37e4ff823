//! [`ZooKeeperServer`]: one ZooKeeper server owned by a test, alone or in
//! an ensemble of its own ([`ZooKeeperServer::ensemble`]), on free loopback
//! ports. Every server is killed when dropped, also when a test panics.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::DelayProxy;
use crate::process::{NotServing, server_started, try_wait_ready};

/// How long servers may take to start (a JVM) and form a quorum.
const STARTUP: Duration = Duration::from_secs(60);

/// Ticks (of 100 ms) a follower waits for its leader, and the leader for
/// a follower, before giving up on it.
const DEFAULT_SYNC_LIMIT: u32 = 20;

/// Debian's `zookeeper` package (3.8).
const JAR: &str = "/usr/share/java/zookeeper.jar";

/// One ZooKeeper server.
pub struct ZooKeeperServer {
    child: Option<Child>,
    client_port: u16,
    dir: TempDir,
}

impl ZooKeeperServer {
    /// A standalone server, serving once this returns.
    pub fn start() -> Self {
        Self::ensemble(1).pop().expect("one server")
    }

    /// An ensemble of `servers` servers, once every one serves (started
    /// again on other ports if a port found free was taken meanwhile).
    pub fn ensemble(servers: usize) -> Vec<Self> {
        for _ in 0..3 {
            let ports = crate::free_ports(3 * servers);
            match Self::try_ensemble_on(&ports, DEFAULT_SYNC_LIMIT, |_, to| ports[3 * to + 1]) {
                Ok(all) => return all,
                Err(failed) if failed.port_taken => continue,
                Err(failed) => panic!("{}", failed.told),
            }
        }
        panic!("ZooKeeper found its ports taken 3 times");
    }

    /// An ensemble of `servers` servers in which each server reaches each
    /// other's quorum port through a [`DelayProxy`] of its own, so that a
    /// test can cut one follower off from its leader and leave the rest
    /// whole. A follower waits `sync_limit` ticks (of 100 ms) for its
    /// leader before it gives up on it and stops serving clients.
    pub async fn ensemble_with_links(servers: usize, sync_limit: u32) -> (Vec<Self>, QuorumLinks) {
        let ports = crate::free_ports(3 * servers);
        let mut links = HashMap::new();
        for from in 0..servers {
            for to in (0..servers).filter(|&to| to != from) {
                let proxy = DelayProxy::start(ports[3 * to + 1]).await;
                links.insert((from, to), proxy);
            }
        }
        let through: HashMap<(usize, usize), u16> = links
            .iter()
            .map(|(&link, proxy)| (link, proxy.port()))
            .collect();
        // Starting blocks (a JVM per server) while the proxies run here.
        let started = tokio::task::spawn_blocking(move || {
            let port = |from: usize, to: usize| match through.get(&(from, to)) {
                Some(&proxy) => proxy,
                None => ports[3 * to + 1],
            };
            Self::ensemble_on(&ports, sync_limit, port)
        });
        let all = started.await.expect("ZooKeeper ensemble start");
        (all, QuorumLinks { links })
    }

    /// The servers on `ports` (client, quorum and election port of each),
    /// server `from` reaching the quorum port of server `to` at
    /// `quorum_port(from, to)`.
    fn ensemble_on(
        ports: &[u16],
        sync_limit: u32,
        quorum_port: impl Fn(usize, usize) -> u16,
    ) -> Vec<Self> {
        Self::try_ensemble_on(ports, sync_limit, quorum_port)
            .unwrap_or_else(|failed| panic!("{}", failed.told))
    }

    /// [`ensemble_on`](Self::ensemble_on), answering what went wrong (the
    /// servers started are stopped as they drop).
    fn try_ensemble_on(
        ports: &[u16],
        sync_limit: u32,
        quorum_port: impl Fn(usize, usize) -> u16,
    ) -> Result<Vec<Self>, NotServing> {
        assert!(
            std::path::Path::new(JAR).exists(),
            "ZooKeeper is not installed: run scripts/test, or apt-get install zookeeper"
        );
        let servers = ports.len() / 3;
        let mut all: Vec<ZooKeeperServer> = ports
            .chunks(3)
            .enumerate()
            .map(|(i, p)| {
                let dir = crate::scratch_dir("lock-testkit-zk-");
                let data = dir.path().join("data");
                std::fs::create_dir_all(&data).expect("zookeeper data dir");
                // A tick of 100 ms: sessions of 200 ms to 60 s. No fsync of
                // the transaction log (its directory is in memory anyway).
                let mut config = format!(
                    "tickTime=100\ninitLimit=100\nsyncLimit={sync_limit}\nforceSync=no\ndataDir={}\nclientPort={}\n\
                     clientPortAddress=127.0.0.1\nmaxSessionTimeout=60000\n\
                     admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,mntr,cons\n",
                    data.display(),
                    p[0]
                );
                if servers > 1 {
                    std::fs::write(data.join("myid"), format!("{}\n", i + 1)).expect("myid");
                    for (to, peer) in ports.chunks(3).enumerate() {
                        let quorum = if to == i { peer[1] } else { quorum_port(i, to) };
                        let line = format!("server.{}=127.0.0.1:{quorum}:{}\n", to + 1, peer[2]);
                        config.push_str(&line);
                    }
                }
                std::fs::write(dir.path().join("zoo.cfg"), config).expect("zoo.cfg");
                ZooKeeperServer {
                    child: None,
                    client_port: p[0],
                    dir,
                }
            })
            .collect();
        for server in &mut all {
            server.spawn();
        }
        for server in &mut all {
            server.try_serving()?;
        }
        Ok(all)
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.path().join("zookeeper.log")).expect("log");
        let child = Command::new("java")
            // The client compiler only: a test server runs for seconds, and
            // the optimising one would take CPU from the tests beside it.
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .args(["-cp", JAR])
            .arg("-Dzookeeper.jmx.log4j.disable=true")
            // Empty parents (containers) go within a fifth of a second.
            .arg("-Dznode.container.checkIntervalMs=200")
            .arg("-Dznode.container.maxPerMinute=100000")
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(self.dir.path().join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn();
        self.child = Some(server_started(child, "ZooKeeper", "java", "zookeeper"));
    }

    /// Waits until the server answers `srvr` as a member of a quorum
    /// (polled: ZooKeeper has no readiness event a test can follow).
    fn wait_serving(&mut self) {
        if let Err(failed) = self.try_serving() {
            panic!("{}", failed.told);
        }
    }

    fn try_serving(&mut self) -> Result<(), NotServing> {
        let port = self.client_port;
        let log = self.dir.path().join("zookeeper.log");
        let serving = || four_letters(port, "srvr").is_some_and(|r| r.contains("Mode: "));
        try_wait_ready(&mut self.child, "ZooKeeper", &log, STARTUP, serving)
    }

    /// Whether the server serves clients (it is standalone, a leader or a
    /// follower).
    pub fn serving(&self) -> bool {
        self.four_letters("srvr")
            .is_some_and(|reply| reply.contains("Mode: "))
    }

    /// The answer to a four-letter command (`srvr`, `mntr`, `cons`).
    pub fn four_letters(&self, command: &str) -> Option<String> {
        four_letters(self.client_port, command)
    }

    /// Whether this server leads its ensemble.
    pub fn leads(&self) -> bool {
        self.four_letters("srvr")
            .is_some_and(|reply| reply.contains("Mode: leader"))
    }

    /// `127.0.0.1:<port>`, as a connect string names it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Freezes the server (SIGSTOP).
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            crate::send_signal(pid, libc::SIGSTOP);
        }
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            crate::send_signal(pid, libc::SIGCONT);
        }
    }

    /// `zk://127.0.0.1:<port>[,...]` for `servers`.
    pub fn url(servers: &[ZooKeeperServer]) -> String {
        let hosts: Vec<String> = servers.iter().map(ZooKeeperServer::address).collect();
        format!("zk://{}", hosts.join(","))
    }

    /// Kills the server (SIGKILL) and reaps it; its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed server again on the same ports and data, and waits
    /// until it serves (in an ensemble: once it has rejoined a quorum).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_serving();
    }
}

/// The answer to four-letter `command` on the client port `port`.
fn four_letters(port: u16, command: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    stream.write_all(command.as_bytes()).ok()?;
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    Some(reply)
}

impl Drop for ZooKeeperServer {
    fn drop(&mut self) {
        if let Some(pid) = self.pid() {
            crate::send_signal(pid, libc::SIGCONT);
        }
        self.kill();
    }
}

/// The quorum links of an ensemble made by
/// [`ZooKeeperServer::ensemble_with_links`]: one proxy for each server's
/// connections to each other's quorum port.
pub struct QuorumLinks {
    links: HashMap<(usize, usize), DelayProxy>,
}

impl QuorumLinks {
    /// The proxy through which server `from` (its index in the ensemble)
    /// reaches server `to`'s quorum port: a follower's connection to its
    /// leader goes through `between(follower, leader)`.
    pub fn between(&self, from: usize, to: usize) -> &DelayProxy {
        &self.links[&(from, to)]
    }
}
