//! [`RedisServer`]: one `redis-server` process owned by a test.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use tempfile::TempDir;

use crate::free_port;

/// How long a server may take to say it is ready.
const STARTUP: Duration = Duration::from_secs(20);

/// Options for a server.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    replica_of: Option<u16>,
    debug_commands: bool,
    cluster: bool,
    tls: bool,
    extra: Vec<String>,
    launcher: Vec<String>,
}

impl ServerOptions {
    /// Start as a replica of the server on `port`.
    pub fn replica_of(mut self, port: u16) -> Self {
        self.replica_of = Some(port);
        self
    }

    /// Allow `DEBUG` (for `DEBUG SLEEP`) from loopback.
    pub fn debug_commands(mut self) -> Self {
        self.debug_commands = true;
        self
    }

    /// Cluster mode (for `CLUSTER KEYSLOT`; no slots are assigned).
    pub fn cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Also listen with TLS on a port of its own, with a certificate for
    /// 127.0.0.1 from a certificate authority made for this server
    /// ([`RedisServer::tls_url`], [`RedisServer::ca_certificate`]).
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Any other `--name value` arguments.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.extra.push(arg.into());
        self
    }

    /// Several arguments at once, as in `["--user", "alice", "on", ">pw"]`.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra.extend(args.into_iter().map(Into::into));
        self
    }

    /// Runs the server under another program, as in `valgrind
    /// --tool=callgrind redis-server ...` (`launcher` is the program and its
    /// arguments). The program must keep the server's pid, as valgrind does.
    pub fn launcher(mut self, launcher: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.launcher = launcher.into_iter().map(Into::into).collect();
        self
    }

    /// Starts a server with these options.
    pub fn start(self) -> RedisServer {
        RedisServer::start_with(self)
    }
}

/// A `redis-server` process owned by a test.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    /// With [`ServerOptions::tls`]: the TLS port.
    tls_port: Option<u16>,
    options: ServerOptions,
    dir: TempDir,
    child: Option<Child>,
}

/// Writes `ca.crt` and `server.crt`/`server.key` (for 127.0.0.1, signed by
/// the CA) into `dir`, with the `openssl` command.
pub(crate) fn make_certificates(dir: &std::path::Path) {
    if dir.join("server.crt").exists() {
        return;
    }
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1\n").expect("san.ext");
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=lock-testkit CA",
        ],
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    ];
    for args in steps {
        let status = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|_| missing_binary("openssl"));
        assert!(status.success(), "openssl {args:?} failed");
    }
}

/// Starts `command` (a redis-server, in any mode) with its log on stdout
/// and waits for a log line with `ready`; `None` if it did not come (the
/// port was taken, or it failed), the process then killed.
pub(crate) fn spawn_until(command: &mut Command, ready: &'static str) -> Option<Child> {
    let mut child = match command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
    {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            missing_binary(command.get_program().to_str().unwrap_or("redis-server"))
        }
        Err(err) => panic!("could not start {command:?}: {err}"),
    };
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_tx, ready_rx) = mpsc::channel();
    // The reader keeps draining the log so the server never blocks on it.
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(ready) {
                let _ = ready_tx.send(true);
            } else if line.contains("Address already in use") {
                let _ = ready_tx.send(false);
            }
        }
        let _ = ready_tx.send(false);
    });
    if ready_rx.recv_timeout(STARTUP).unwrap_or(false) {
        return Some(child);
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn missing_binary(program: &str) -> ! {
    panic!(
        "{program} is not installed: install it with `apt-get install -y {program}` \
         (for redis-server, scripts/test does so)"
    )
}

impl RedisServer {
    /// Starts a plain server.
    pub fn start() -> Self {
        ServerOptions::default().start()
    }

    /// Options for a server with more than the defaults.
    pub fn options() -> ServerOptions {
        ServerOptions::default()
    }

    fn start_with(options: ServerOptions) -> Self {
        let mut dir = tempfile::Builder::new()
            .prefix("lock-testkit-redis-")
            .tempdir()
            .expect("temp dir");
        // A port picked this way can be taken by another test before the
        // server binds it; try a few.
        for _ in 0..5 {
            let port = free_port();
            let tls_port = options.tls.then(free_port);
            if tls_port.is_some() {
                make_certificates(dir.path());
            }
            let mut server = RedisServer {
                port,
                tls_port,
                options: options.clone(),
                dir,
                child: None,
            };
            if server.spawn() {
                return server;
            }
            dir = server.take_dir();
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    fn take_dir(&mut self) -> TempDir {
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("temp dir"))
    }

    fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--port",
            &self.port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            "",
            "--loglevel",
            "notice",
            "--dir",
            &self.dir.path().display().to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(master) = self.options.replica_of {
            args.extend(["--replicaof".into(), "127.0.0.1".into(), master.to_string()]);
        }
        if self.options.debug_commands {
            args.extend(["--enable-debug-command".into(), "local".into()]);
        }
        if self.options.cluster {
            args.extend([
                "--cluster-enabled".into(),
                "yes".into(),
                // A replica's first sync at once, not after 5 s: a test
                // starts with its replicas in step.
                "--repl-diskless-sync-delay".into(),
                "0".into(),
                "--cluster-config-file".into(),
                self.dir.path().join("nodes.conf").display().to_string(),
            ]);
        }
        if let Some(tls_port) = self.tls_port {
            let file = |name: &str| self.dir.path().join(name).display().to_string();
            args.extend([
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                file("server.crt"),
                "--tls-key-file".into(),
                file("server.key"),
                "--tls-ca-cert-file".into(),
                file("ca.crt"),
                "--tls-auth-clients".into(),
                "no".into(),
            ]);
        }
        args.extend(self.options.extra.iter().cloned());
        args
    }

    /// Starts the process and waits for "Ready to accept connections".
    fn spawn(&mut self) -> bool {
        let mut command = match self.options.launcher.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg("redis-server");
                command
            }
            None => Command::new("redis-server"),
        };
        command.args(self.args());
        self.child = spawn_until(&mut command, "Ready to accept connections");
        self.child.is_some()
    }

    /// The port it listens on (loopback only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// `rediss://127.0.0.1:<tls port>` (a server started with
    /// [`ServerOptions::tls`]).
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.expect("a server started with tls()");
        format!("rediss://127.0.0.1:{port}")
    }

    /// The PEM certificate of the authority that signed the server's TLS
    /// certificate.
    pub fn ca_certificate(&self) -> Vec<u8> {
        std::fs::read(self.ca_file()).expect("ca.crt")
    }

    /// The file of [`ca_certificate`](Self::ca_certificate).
    pub fn ca_file(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// The server's process id (while running).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// A client for direct inspection.
    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url()).expect("valid url")
    }

    /// A fresh multiplexed connection for direct inspection.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        // No response timeout: tests call WAIT and talk to paused servers.
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        self.client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("connect to the test server")
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = self.pid().expect("server is running");
        assert!(send_signal(pid, signal), "kill({pid}, {signal}) failed");
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Kills the server (SIGKILL) and waits for it to be gone; its data is
    /// lost (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port with the same options.
    pub fn restart(&mut self) {
        self.kill();
        assert!(
            self.spawn(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    /// Starts a replica of this server and waits until it has synced.
    pub async fn start_replica(&self) -> RedisServer {
        let replica = ServerOptions::default().replica_of(self.port).start();
        self.wait_for_replicas(1).await;
        replica
    }

    /// Promotes this replica to a master (`REPLICAOF NO ONE`); it keeps its data.
    pub async fn promote(&self) {
        let mut conn = self.connection().await;
        let _: () = redis::cmd("REPLICAOF")
            .arg("NO")
            .arg("ONE")
            .query_async(&mut conn)
            .await
            .expect("REPLICAOF NO ONE");
    }

    /// Cuts this replica off its master while keeping its data: it is
    /// pointed at a loopback port where nothing listens.
    pub async fn detach(&self) {
        let nowhere = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = nowhere.local_addr().expect("addr").port();
        drop(nowhere);
        let mut conn = self.connection().await;
        let _: () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(port)
            .query_async(&mut conn)
            .await
            .expect("REPLICAOF");
    }

    /// Blocks until `n` replicas have every write so far (Redis `WAIT`).
    pub async fn wait_for_replicas(&self, n: usize) {
        let mut conn = self.connection().await;
        // A write gives WAIT something to wait for; it is undone in the same
        // transaction, so that no replica or failover keeps it.
        let _: () = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("testkit:sync")
            .arg(1)
            .ignore()
            .cmd("DEL")
            .arg("testkit:sync")
            .ignore()
            .query_async(&mut conn)
            .await
            .expect("SET and DEL");
        let synced: usize = redis::cmd("WAIT")
            .arg(n)
            .arg(20_000)
            .query_async(&mut conn)
            .await
            .expect("WAIT");
        assert!(
            synced >= n,
            "only {synced} of {n} replicas synced within 20 s"
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends `signal` to process `pid` (SIGSTOP, SIGCONT, SIGKILL ...);
/// `false` if it failed (no such process).
#[allow(unsafe_code)]
pub fn send_signal(pid: u32, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid as libc::pid_t, signal) == 0 }
}

/// Bytes that clients have sent to the loopback server on `port` and it
/// has not read yet, summed over its established connections (from
/// `/proc/net/tcp`): how a test sees a request reach a frozen server.
pub fn unread_bytes(port: u16) -> u64 {
    let tcp = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
    let local = format!("0100007F:{port:04X}");
    tcp.lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        // Established (state 01) connections, on the server's side.
        .filter(|fields| fields.len() > 4 && fields[1] == local && fields[3] == "01")
        .filter_map(|fields| {
            let (_, rx_queue) = fields[4].split_once(':')?;
            u64::from_str_radix(rx_queue, 16).ok()
        })
        .sum()
}

/// Number of calls of `command` (lowercase, e.g. `evalsha`) the server has
/// served, from `INFO commandstats`.
pub async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Commands a lock client sends itself; the ones its scripts run inside
/// Redis are counted separately by `INFO commandstats`.
pub const LOCK_CLIENT_COMMANDS: [&str; 8] = [
    "evalsha",
    "eval",
    "script",
    "subscribe",
    "unsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "wait",
];

/// Calls of the [`LOCK_CLIENT_COMMANDS`] the server has served.
pub async fn lock_commands_sent(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let mut sent = 0;
    for command in LOCK_CLIENT_COMMANDS {
        sent += command_calls(conn, command).await;
    }
    sent
}

/// Asserts that none of `servers` keeps a lasting key ([`lasting_keys`]),
/// naming the server and the keys left.
pub async fn assert_nothing_left<'a>(servers: impl IntoIterator<Item = &'a RedisServer>) {
    for server in servers {
        let mut conn = server.connection().await;
        let left = lasting_keys(&mut conn).await;
        assert!(left.is_empty(), "left behind on {}: {left:?}", server.url());
    }
}

/// Every key of the server except token records that lapse on their own
/// (`:fence` with at most 21 s to live): every acquire records its token
/// until the server clock is 10 s past it, so that tokens keep rising when
/// the clock steps back, and a token minted while the clock was stepped
/// forward leads it by up to 10 s more. What [`all_keys`] lists, less those.
pub async fn lasting_keys(conn: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut lasting = Vec::new();
    for key in all_keys(conn).await {
        if key.ends_with(":fence") {
            let pttl: redis::RedisResult<i64> =
                redis::cmd("PTTL").arg(&key).query_async(conn).await;
            let pttl = match pttl {
                Ok(pttl) => pttl,
                // A Cluster replica sends PTTL to its master, whose own
                // listing judges the key.
                Err(err) if err.redirect_node().is_some() => continue,
                Err(err) => panic!("PTTL {key}: {err}"),
            };
            // -2: gone meanwhile.
            if pttl == -2 || (0..=21_000).contains(&pttl) {
                continue;
            }
        }
        lasting.push(key);
    }
    lasting
}

/// Every key currently in the server (test servers are small).
pub async fn all_keys(conn: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(conn)
        .await
        .expect("KEYS");
    keys.sort();
    keys
}
