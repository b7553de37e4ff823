//! [`PgBouncer`]: Debian's `pgbouncer` in transaction-pooling mode in front
//! of a [`PostgresServer`] of the kit, on a free loopback port, killed when
//! dropped (also when the test panics).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::PostgresServer;
use crate::process::{server_started, wait_ready};

/// A PgBouncer pooling transactions to a PostgreSQL of its own.
#[derive(Debug)]
pub struct PgBouncer {
    /// The server behind it.
    pub postgres: PostgresServer,
    port: u16,
    dir: TempDir,
    child: Option<Child>,
}

impl PgBouncer {
    /// Starts a PostgreSQL and a PgBouncer in front of it (`pool_mode =
    /// transaction`, trust auth for user `postgres`).
    pub fn start() -> Self {
        let postgres = PostgresServer::start();
        let dir = crate::scratch_dir("lock-testkit-pgbouncer-");
        let port = crate::free_port();
        let ini = format!(
            "[databases]\n\
             postgres = host=127.0.0.1 port={pg} dbname=postgres user=postgres\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/users.txt\n\
             pool_mode = transaction\n\
             max_client_conn = 500\n\
             default_pool_size = 8\n\
             ignore_startup_parameters = extra_float_digits\n\
             logfile = {dir}/pgbouncer.log\n",
            pg = postgres.port(),
            dir = dir.path().display(),
        );
        std::fs::write(dir.path().join("pgbouncer.ini"), ini).expect("write pgbouncer.ini");
        std::fs::write(dir.path().join("users.txt"), "\"postgres\" \"\"\n").expect("users");
        let mut bouncer = PgBouncer {
            postgres,
            port,
            dir,
            child: None,
        };
        bouncer.run();
        bouncer
    }

    fn run(&mut self) {
        let mut command = Command::new("pgbouncer");
        command
            .arg(self.dir.path().join("pgbouncer.ini"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // PgBouncer will not run as root.
        if let Some((uid, gid)) = unprivileged() {
            use std::os::unix::process::CommandExt;
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(self.dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown of the PgBouncer dir failed");
            command.uid(uid).gid(gid);
        }
        self.child = Some(server_started(
            command.spawn(),
            "PgBouncer",
            "pgbouncer",
            "pgbouncer",
        ));
        let port = self.port;
        let log = self.log();
        wait_ready(
            &mut self.child,
            "PgBouncer",
            &log,
            Duration::from_secs(20),
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        );
    }

    /// The port it listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its log file.
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("pgbouncer.log")
    }

    /// A `postgres://` URL of database `postgres` through the pooler, with
    /// lock-core's `pgbouncer=true`.
    pub fn postgres_url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?pgbouncer=true",
            self.port
        )
    }

    /// [`postgres_url`](Self::postgres_url) with a `listen_url`: the
    /// server's own address, for `LISTEN` (which a transaction pooler
    /// cannot carry).
    pub fn listening_url(&self) -> String {
        let direct = self.postgres.postgres_url();
        let direct =
            percent_encoding::utf8_percent_encode(&direct, percent_encoding::NON_ALPHANUMERIC);
        format!("{}&listen_url={direct}", self.postgres_url())
    }

    /// Kills PgBouncer (SIGKILL: every client connection is cut) and starts
    /// it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.run();
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The uid and gid of user `postgres` when this process runs as root.
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: geteuid(2) has no preconditions; getpwnam(3) is given a
    // NUL-terminated name and its answer is read before any other call.
    #[allow(unsafe_code)]
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        let entry = libc::getpwnam(c"postgres".as_ptr());
        (!entry.is_null()).then(|| ((*entry).pw_uid, (*entry).pw_gid))
    }
}
