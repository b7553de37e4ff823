//! [`MysqlServer`]: a MariaDB server of the test's own, made with Debian's
//! `mariadb-install-db` in a scratch dir, listening on a free loopback port
//! (never the machine's running server), stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::ClockShift;
use crate::process::{NotServing, try_wait_ready};

/// The database the kit makes in each server, which its URLs name.
pub const MYSQL_DATABASE: &str = "lock_test";

/// A MariaDB server owned by a test.
#[derive(Debug)]
pub struct MysqlServer {
    port: u16,
    dir: TempDir,
    /// What the server runs with beyond ours (a clock shift's).
    env: Vec<(String, String)>,
    child: std::sync::Mutex<Option<Child>>,
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    #[allow(unsafe_code)]
    let uid = unsafe { libc::geteuid() };
    uid == 0
}

/// How the kit runs the server, after `--datadir`: small buffers (a test
/// holds a few rows), no binary log, and every commit flushed to the log,
/// so that a killed server keeps what it acknowledged.
const SERVER_ARGS: [&str; 7] = [
    "--no-defaults",
    "--bind-address=127.0.0.1",
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=8M",
    "--skip-log-bin",
    "--max-connections=500",
    "--innodb-flush-log-at-trx-commit=1",
];

impl MysqlServer {
    /// Creates and starts a server with user `root` (no password) and the
    /// database [`MYSQL_DATABASE`].
    pub fn start() -> Self {
        Self::start_in(Vec::new())
    }

    /// [`start`](Self::start) on `clock`, whose steps the server's
    /// `UTC_TIMESTAMP()` follows (also after a restart).
    pub fn start_on_clock(clock: &ClockShift) -> Self {
        Self::start_in(clock.env().to_vec())
    }

    fn start_in(env: Vec<(String, String)>) -> Self {
        let dir = crate::scratch_dir("lock-testkit-mysql-");
        copy_template(&dir.path().join("data"));
        let mut server = MysqlServer {
            port: 0,
            dir,
            env,
            child: std::sync::Mutex::new(None),
        };
        for _ in 0..5 {
            server.port = crate::free_port();
            match server.try_start() {
                Ok(()) => return server,
                Err(failed) if failed.port_taken => continue,
                Err(failed) => panic!("{}", failed.told),
            }
        }
        panic!("MariaDB did not start on any of 5 free ports");
    }

    fn try_start(&self) -> Result<(), NotServing> {
        let path = self.dir.path();
        let log = path.join("server.log");
        let mut command = Command::new(server_binary());
        command
            .args(SERVER_ARGS)
            .arg(format!("--datadir={}", path.join("data").display()))
            .arg(format!("--port={}", self.port))
            .arg(format!("--socket={}", path.join("sock").display()))
            .arg(format!("--pid-file={}", path.join("pid").display()))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--tmpdir={}", path.display()))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            command.arg("--user=root");
        }
        let child = command.spawn().unwrap_or_else(|err| {
            panic!(
                "could not start MariaDB ({err}): run scripts/test, or apt-get install \
                 mariadb-server"
            )
        });
        let mut child = Some(child);
        let ready = || self.sql(None, "SELECT 1").is_ok();
        let started = try_wait_ready(&mut child, "MariaDB", &log, Duration::from_secs(60), ready);
        *self.child.lock().unwrap_or_else(|e| e.into_inner()) = child;
        started?;
        let made = format!("CREATE DATABASE IF NOT EXISTS {MYSQL_DATABASE}");
        self.sql(None, &made)
            .unwrap_or_else(|err| panic!("{made}: {err}"));
        Ok(())
    }

    /// Runs `sql` with the `mariadb` client as `root`; its output, or what
    /// the client said.
    pub fn sql_as_root(&self, sql: &str) -> Result<String, String> {
        self.sql(Some(MYSQL_DATABASE), sql)
    }

    fn sql(&self, database: Option<&str>, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .args(["--protocol=tcp", "-h127.0.0.1", "-uroot", "-N", "-B"])
            .arg(format!("-P{}", self.port))
            .args(database)
            .arg("-e")
            .arg(sql)
            .output()
            .map_err(|err| err.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
        }
    }

    /// The port it listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `mysql://` URL of database [`MYSQL_DATABASE`], as user `root`.
    pub fn mysql_url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/{MYSQL_DATABASE}", self.port)
    }

    /// Stops the server (a clean shutdown: clients are cut off, the data
    /// is written) and starts it again on the same port.
    pub fn restart(&self) {
        self.stop(libc::SIGTERM);
        self.start_again();
    }

    /// Kills the server as a crash would (SIGKILL: InnoDB recovers from its
    /// log at the next start) and starts it again on the same port.
    pub fn crash_and_restart(&self) {
        self.stop(libc::SIGKILL);
        self.start_again();
    }

    fn start_again(&self) {
        if let Err(failed) = self.try_start() {
            panic!("MariaDB did not start again: {}", failed.told);
        }
    }

    fn stop(&self, signal: i32) {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut child) = child {
            // A frozen server could not stop.
            crate::send_signal(child.id(), libc::SIGCONT);
            crate::send_signal(child.id(), signal);
            let _ = child.wait();
        }
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        let child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        child.as_ref().map(Child::id)
    }

    /// The directory of the server.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for MysqlServer {
    fn drop(&mut self) {
        self.stop(libc::SIGKILL);
    }
}

/// `mariadbd`, or `mysqld` where only that name is installed.
fn server_binary() -> &'static str {
    match Path::new("/usr/sbin/mariadbd").exists() {
        true => "/usr/sbin/mariadbd",
        false => "mysqld",
    }
}

/// Makes the data directory `data`: a copy of one `mariadb-install-db`
/// made once per machine and user (it costs seconds; a copy a tenth of
/// that), kept in the temp dir.
fn copy_template(data: &Path) {
    let uid = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(data.parent().expect("a scratch dir")).expect("scratch dir"),
    );
    let template = std::env::temp_dir().join(format!("lock-testkit-mysql-template-{uid}"));
    if !template.join("data").join("mysql").exists() {
        make_template(&template);
    }
    let copied = Command::new("cp")
        .arg("-a")
        .arg(template.join("data"))
        .arg(data)
        .status()
        .expect("cp");
    assert!(copied.success(), "copying the MariaDB template failed");
}

/// Runs `mariadb-install-db` into a directory of its own and renames it to
/// `template`: one rename wins when tests race.
fn make_template(template: &Path) {
    let made = tempfile::Builder::new()
        .prefix("lock-testkit-mysql-making-")
        .tempdir()
        .expect("temp dir");
    let data: PathBuf = made.path().join("data");
    let mut command = Command::new("mariadb-install-db");
    command
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .args([
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--innodb-log-file-size=8M",
        ]);
    if is_root() {
        command.arg("--user=root");
    }
    let out = command.output().unwrap_or_else(|err| {
        panic!(
            "mariadb-install-db could not run ({err}): run scripts/test, or apt-get install \
             mariadb-server"
        )
    });
    assert!(
        out.status.success(),
        "mariadb-install-db failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = Command::new("sync").arg("-f").arg(&data).status();
    let made = made.keep();
    if std::fs::rename(&made, template).is_err() {
        // Another test made it first.
        let _ = std::fs::remove_dir_all(&made);
    }
}
