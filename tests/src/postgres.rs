//! [`PostgresServer`]: a PostgreSQL of the test's own, made with Debian's
//! `initdb` and `pg_ctl` in a temp dir, listening on a free loopback port
//! (never the machine's running server), stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

use crate::ClockShift;

/// A PostgreSQL cluster owned by a test.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    bin: PathBuf,
    dir: TempDir,
    as_postgres: bool,
    /// Whether it also takes TLS connections (`ssl = on`).
    tls: bool,
    /// More `-c name=value` settings of the server.
    settings: Vec<String>,
    /// Environment of the server's processes (a [`ClockShift`]'s).
    env: Vec<(String, String)>,
}

fn bin_dir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().unwrap_or_else(|| {
        panic!(
            "PostgreSQL server binaries (initdb, pg_ctl) are not installed: install them with \
             `apt-get install -y postgresql` (or run scripts/test, which does so)"
        )
    })
}

/// How the kit runs `initdb` (after `-D <dir>`).
const INITDB_ARGS: [&str; 6] = ["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"];

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    #[allow(unsafe_code)]
    let uid = unsafe { libc::geteuid() };
    uid == 0
}

impl PostgresServer {
    /// Creates and starts a cluster with trust auth for user `postgres`.
    pub fn start() -> Self {
        Self::start_with(false, &[])
    }

    /// [`start`](Self::start) with more server settings (`name=value`,
    /// as `postgres -c` takes them).
    pub fn start_with_settings(settings: &[&str]) -> Self {
        Self::start_with(false, settings)
    }

    /// [`start`](Self::start), also taking TLS connections with a
    /// certificate for 127.0.0.1 from a certificate authority made for it
    /// ([`ca_certificate`](Self::ca_certificate)).
    pub fn start_tls() -> Self {
        Self::start_with(true, &[])
    }

    /// [`start_with_settings`](Self::start_with_settings) on `clock`, whose
    /// steps the server's `clock_timestamp()` and `now()` follow (also
    /// after a restart).
    pub fn start_on_clock(clock: &ClockShift, settings: &[&str]) -> Self {
        Self::start_in(false, settings, clock.env().to_vec())
    }

    fn start_with(tls: bool, settings: &[&str]) -> Self {
        Self::start_in(tls, settings, Vec::new())
    }

    fn start_in(tls: bool, settings: &[&str], env: Vec<(String, String)>) -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("lock-testkit-pg-")
            .tempdir()
            .expect("temp dir");
        if tls {
            crate::server::make_certificates(dir.path());
            // The server refuses a key others can read.
            let key = dir.path().join("server.key");
            let mode = std::os::unix::fs::PermissionsExt::from_mode(0o600);
            std::fs::set_permissions(&key, mode).expect("chmod server.key");
        }
        // initdb refuses to run as root: run the server as `postgres`.
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown of the PostgreSQL temp dir failed");
        }
        let mut server = PostgresServer {
            port: 0,
            bin,
            dir,
            as_postgres,
            tls,
            settings: settings.iter().map(|s| (*s).to_owned()).collect(),
            env,
        };
        server.copy_template();
        for _ in 0..5 {
            server.port = crate::free_port();
            if server.try_start() {
                return server;
            }
        }
        panic!("PostgreSQL did not start on any of 5 free ports");
    }

    /// Makes the data directory: a copy of a cluster `initdb` made once
    /// per machine, user, PostgreSQL version and set of initdb arguments
    /// (initdb costs a CPU-second; a copy a tenth of that), kept in the temp
    /// dir.
    fn copy_template(&self) {
        let version = self.bin.parent().and_then(Path::file_name);
        let version = version.and_then(|v| v.to_str()).unwrap_or("pg");
        let owner = match self.as_postgres {
            true => "postgres".to_owned(),
            false => std::os::unix::fs::MetadataExt::uid(
                &std::fs::metadata(self.dir.path()).expect("temp dir"),
            )
            .to_string(),
        };
        let made_by: String = INITDB_ARGS
            .concat()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .collect();
        let template = std::env::temp_dir().join(format!(
            "lock-testkit-pg-template-{version}-{owner}-{made_by}"
        ));
        let mut own = None;
        if !template.join("data").join("PG_VERSION").exists() {
            own = self.make_template(&template);
        }
        let from = own.as_ref().unwrap_or(&template);
        let copied = Command::new("cp")
            .arg("-a")
            .arg(from.join("data"))
            .arg(self.data())
            .status()
            .expect("cp");
        assert!(copied.success(), "copying the PostgreSQL template failed");
        if let Some(own) = own {
            let _ = std::fs::remove_dir_all(own);
        }
    }

    /// Runs `initdb` into a directory of its own, written to disk, and
    /// renames it to `template`: one rename wins when tests race. `Some`
    /// (that directory) if the template is not this test's to read after
    /// all: it copies from its own.
    fn make_template(&self, template: &Path) -> Option<PathBuf> {
        let made = tempfile::Builder::new()
            .prefix("lock-testkit-pg-making-")
            .tempdir()
            .expect("temp dir");
        if self.as_postgres {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(made.path())
                .status()
                .expect("chown");
            assert!(
                status.success(),
                "chown of the PostgreSQL template dir failed"
            );
        }
        let data = made.path().join("data");
        let mut args = vec!["-D".to_owned(), data.display().to_string()];
        args.extend(INITDB_ARGS.iter().map(|arg| (*arg).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run("initdb", &args);
        // `--no-sync` left it to the page cache: a template must outlive a
        // crash whole.
        let _ = Command::new("sync").arg("-f").arg(&data).status();
        let made = made.keep();
        if std::fs::rename(&made, template).is_ok() {
            return None;
        }
        // Another test made it first: its copy serves, if this one can read it.
        if std::fs::read(template.join("data").join("PG_VERSION")).is_ok() {
            let _ = std::fs::remove_dir_all(&made);
            return None;
        }
        Some(made)
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn command(&self, tool: &str) -> Command {
        self.command_as_server(self.bin.join(tool))
    }

    /// `program`, run as the server's user.
    fn command_as_server(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let path = program.as_ref();
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let out = self.command(tool).args(args).output().expect(tool);
        assert!(
            out.status.success(),
            "{tool} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn try_start(&self) -> bool {
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off",
            self.port,
            self.dir.path().display()
        );
        for setting in &self.settings {
            options += &format!(" -c {setting}");
        }
        if self.tls {
            let dir = self.dir.path().display();
            options += &format!(
                " -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key"
            );
        }
        let log = self.dir.path().join("server.log");
        let mut command = match self.env.is_empty() {
            true => self.command("pg_ctl"),
            // Through `env`: `runuser` would not pass LD_PRELOAD on.
            false => {
                let mut command = self.command_as_server("env");
                command.args(self.env.iter().map(|(k, v)| format!("{k}={v}")));
                command.arg(self.bin.join("pg_ctl"));
                command
            }
        };
        command
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(&log)
            .args(["-o", &options, "-w", "-t", "30", "start"])
            .output()
            .map(|out| out.status.success())
            .unwrap_or(false)
    }

    /// The port it listens on (127.0.0.1 only).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `postgres://` URL of database `postgres`, as user `postgres`.
    pub fn postgres_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// [`postgres_url`](Self::postgres_url) that asks for TLS
    /// (`sslmode=require`).
    pub fn postgres_tls_url(&self) -> String {
        format!("{}?sslmode=require", self.postgres_url())
    }

    /// The PEM certificate of the authority that signed the server's TLS
    /// certificate ([`start_tls`](Self::start_tls)).
    pub fn ca_certificate(&self) -> Vec<u8> {
        std::fs::read(self.dir.path().join("ca.crt")).expect("ca.crt")
    }

    /// A tokio-postgres connection string for database `postgres`.
    pub fn url(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// A connected client (its connection task runs on the current runtime).
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// Stops the server (`pg_ctl stop -m fast`: clients are cut off, the
    /// data is written) and starts it again on the same port.
    pub fn restart(&self) {
        self.stop_and_start("fast");
    }

    /// Kills the server as a crash would (`pg_ctl stop -m immediate`: no
    /// checkpoint, recovery from the WAL at the next start) and starts it
    /// again on the same port.
    pub fn crash_and_restart(&self) {
        self.stop_and_start("immediate");
    }

    fn stop_and_start(&self, mode: &str) {
        let data = self.data().display().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", mode, "-w", "stop"]);
        assert!(
            self.try_start(),
            "PostgreSQL did not start again on port {}",
            self.port
        );
    }

    /// Makes `role` a superuser that must log in over TCP with `password`
    /// (scram-sha-256; every other role keeps trust), and waits until the
    /// server has read the new rule.
    pub async fn require_password(&self, role: &str, password: &str) {
        let admin = self.client().await;
        let create = format!("CREATE ROLE {role} LOGIN SUPERUSER PASSWORD '{password}'");
        admin.batch_execute(&create).await.expect("create the role");
        let hba = self.data().join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        let rule = format!("host all {role} 127.0.0.1/32 scram-sha-256\n");
        std::fs::write(&hba, rule + &rules).expect("write pg_hba.conf");
        self.run(
            "pg_ctl",
            &["-D", &self.data().display().to_string(), "reload"],
        );
        // The reload is a signal: the rule holds once a login without the
        // password is refused.
        let without = format!(
            "host=127.0.0.1 port={} user={role} dbname=postgres",
            self.port
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while tokio_postgres::connect(&without, tokio_postgres::NoTls)
            .await
            .is_ok()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the password rule did not take"
            );
            tokio::task::yield_now().await;
        }
    }

    /// The server's processes: the postmaster and every process it started
    /// (client backends, the writers), for their CPU time.
    pub fn pids(&self) -> Vec<u32> {
        let postmaster = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .ok()
            .and_then(|pid| pid.lines().next()?.trim().parse::<u32>().ok());
        let Some(postmaster) = postmaster else {
            return Vec::new();
        };
        let children = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        let children = children.filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // The fields after the command, which is in parentheses.
            let fields = stat.rsplit_once(')')?.1;
            let parent: u32 = fields.split_whitespace().nth(1)?.parse().ok()?;
            (parent == postmaster).then_some(pid)
        });
        std::iter::once(postmaster).chain(children).collect()
    }

    /// The directory of the cluster.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        // A frozen server could not stop.
        for pid in self.pids() {
            crate::send_signal(pid, libc::SIGCONT);
        }
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
