//! [`EtcdServer`]: one etcd member owned by a test, alone or in a cluster
//! of its own ([`EtcdServer::cluster`]), on free loopback ports. Every
//! member is killed when dropped, also when a test panics.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::free_ports;
use crate::process::{NotServing, server_started, try_wait_ready};

/// What `GET /health` says of a cluster with a leader.
const HEALTHY: &str = "\"health\":\"true\"";

/// How long members may take to elect a leader and serve.
const STARTUP: Duration = Duration::from_secs(30);

/// One `etcd` process (Debian's `etcd-server`, 3.4).
pub struct EtcdServer {
    child: Option<Child>,
    name: String,
    client_port: u16,
    peer_port: u16,
    /// `name=peer-url,...` of every member, to start it again with.
    initial_cluster: String,
    /// The cluster's token.
    token: String,
    dir: TempDir,
}

impl EtcdServer {
    /// A single-member cluster, serving once this returns.
    pub fn start() -> Self {
        Self::cluster(1).pop().expect("one member")
    }

    /// A cluster of `members` members, once it has a leader and every
    /// member serves (started again on other ports if a port found free was
    /// taken meanwhile).
    pub fn cluster(members: usize) -> Vec<Self> {
        for _ in 0..3 {
            match Self::try_cluster(members) {
                Ok(servers) => return servers,
                Err(failed) if failed.port_taken => continue,
                Err(failed) => panic!("{}", failed.told),
            }
        }
        panic!("etcd found its ports taken 3 times");
    }

    fn try_cluster(members: usize) -> Result<Vec<Self>, NotServing> {
        let ports = free_ports(2 * members);
        let ports: Vec<(u16, u16)> = ports.chunks(2).map(|pair| (pair[0], pair[1])).collect();
        // A token of its own: members of another test's cluster that got
        // one of these ports never join this one.
        let token = format!("lock-testkit-{}-{}", std::process::id(), ports[0].0);
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut servers: Vec<EtcdServer> = ports
            .into_iter()
            .enumerate()
            .map(|(i, (client_port, peer_port))| EtcdServer {
                child: None,
                name: format!("m{i}"),
                client_port,
                peer_port,
                initial_cluster: initial_cluster.clone(),
                token: token.clone(),
                dir: crate::scratch_dir("lock-testkit-etcd-"),
            })
            .collect();
        for server in &mut servers {
            server.spawn("new");
        }
        for server in &mut servers {
            server.try_healthy()?;
        }
        Ok(servers)
    }

    fn spawn(&mut self, state: &str) {
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).expect("etcd log");
        let child = Command::new("etcd")
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            // Elections within a quarter second: the minimum lease ttl
            // (1.5 election timeouts, in whole seconds) is then 1 s, which
            // the contract's sub-second leases round up to.
            .args(["--heartbeat-interval", "25", "--election-timeout", "250"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn();
        let what = format!("etcd {}", self.name);
        self.child = Some(server_started(child, &what, "etcd", "etcd-server"));
    }

    /// Waits until the member answers `GET /health` with a healthy cluster
    /// (polled: etcd has no readiness event a test can follow).
    fn wait_healthy(&mut self) {
        if let Err(failed) = self.try_healthy() {
            panic!("{}", failed.told);
        }
    }

    fn try_healthy(&mut self) -> Result<(), NotServing> {
        let (port, what) = (self.client_port, format!("etcd {}", self.name));
        let log = self.dir.path().join("etcd.log");
        let healthy = || http_get(port, "/health").is_some_and(|r| r.contains(HEALTHY));
        try_wait_ready(&mut self.child, &what, &log, STARTUP, healthy)
    }

    /// Whether the member says the cluster is healthy (it has a leader).
    pub fn healthy(&self) -> bool {
        http_get(self.client_port, "/health").is_some_and(|reply| reply.contains(HEALTHY))
    }

    /// How many messages of gRPC method `method` (`Txn`, `Range`,
    /// `LeaseKeepAlive`, ...) the member has received: requests, and each
    /// message of a stream.
    pub fn requests(&self, method: &str) -> u64 {
        self.counted("grpc_server_msg_received_total", method)
    }

    /// How many calls of gRPC method `method` the member has answered.
    pub fn answered(&self, method: &str) -> u64 {
        self.counted("grpc_server_handled_total", method)
    }

    /// The sum of metric `metric` over the series of gRPC method `method`.
    fn counted(&self, metric: &str, method: &str) -> u64 {
        let metrics = http_get(self.client_port, "/metrics").expect("etcd metrics");
        let (series, method) = (format!("{metric}{{"), format!("grpc_method=\"{method}\""));
        metrics
            .lines()
            .filter(|l| l.starts_with(&series) && l.contains(&method))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|n| n as u64)
            .sum()
    }

    /// The client endpoint, `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// `etcd://127.0.0.1:<port>[,...]` for `members`.
    pub fn url(members: &[EtcdServer]) -> String {
        let hosts: Vec<String> = members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        format!("etcd://{}", hosts.join(","))
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.client_port
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Freezes the member (SIGSTOP).
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            crate::send_signal(pid, libc::SIGSTOP);
        }
    }

    /// Thaws a paused member (SIGCONT).
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            crate::send_signal(pid, libc::SIGCONT);
        }
    }

    /// Kills the member (SIGKILL) and reaps it; its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed member again on the same ports and data, and waits
    /// until it serves.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn("existing");
        self.wait_healthy();
    }
}

/// The body and headers of `GET path` on the client port `port`.
fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    Some(reply)
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}
