//! The demo runs as README.md says: on the embedded backend without
//! `REDIS_URL` or `LOCK_URL`, on Redis with the first, on the store the
//! second names (etcd, ZooKeeper) with it, when the examples are built
//! with their `etcd` and `zookeeper` features (as `scripts/test` builds them).

use std::path::PathBuf;
use std::process::Command;

use lock_testkit::RedisServer;
#[cfg(all(feature = "etcd", feature = "zookeeper"))]
use lock_testkit::{EtcdServer, ZooKeeperServer};

/// `target/<profile>/examples/<name>`, built by `cargo test` beside this test.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo test --workspace`",
        path.display()
    );
    path
}

fn run(redis_url: Option<&str>) -> String {
    run_example("quickstart", &[], redis_url)
}

fn run_example(name: &str, args: &[&str], redis_url: Option<&str>) -> String {
    let mut command = Command::new(example(name));
    command
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("LOCK_URL");
    if let Some(url) = redis_url {
        command.env("REDIS_URL", url);
    }
    let out = command.output().expect("run the example");
    assert!(out.status.success(), "{name} failed: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn check(stdout: &str, backend: &str) {
    assert!(
        stdout.contains(&format!("backend: \"{backend}")),
        "{stdout}"
    );
    assert!(!stdout.contains("rejected"), "{stdout}");
    assert!(stdout.contains("order 41: total 60"), "{stdout}");
    assert!(stdout.contains("order 42: total 60"), "{stdout}");
    assert!(
        stdout.contains("as expected: lock `order:41` is still held by another owner"),
        "{stdout}"
    );
}

#[test]
fn the_demo_runs_on_the_memory_backend() {
    check(&run(None), "memory");
}

#[test]
fn the_demo_runs_on_redis() {
    let server = RedisServer::start();
    check(&run(Some(&server.url())), "redis");
}

#[test]
fn the_demo_runs_on_postgres() {
    let server = lock_testkit::PostgresServer::start();
    let out = Command::new(example("quickstart"))
        .env_remove("REDIS_URL")
        .env("LOCK_URL", server.postgres_url())
        .output()
        .expect("run the demo");
    assert!(
        out.status.success(),
        "the demo failed on PostgreSQL: {out:?}"
    );
    check(&String::from_utf8(out.stdout).expect("utf-8"), "postgres");
}

#[test]
#[cfg(all(feature = "etcd", feature = "zookeeper"))]
fn the_demo_runs_on_the_store_lock_url_names() {
    let member = EtcdServer::start();
    let server = ZooKeeperServer::start();
    let urls = [
        (EtcdServer::url(std::slice::from_ref(&member)), "etcd"),
        (
            ZooKeeperServer::url(std::slice::from_ref(&server)),
            "zookeeper",
        ),
    ];
    for (url, backend) in urls {
        let out = Command::new(example("quickstart"))
            .env_remove("REDIS_URL")
            .env("LOCK_URL", &url)
            .output()
            .expect("run the demo");
        assert!(out.status.success(), "the demo failed on {url}: {out:?}");
        check(&String::from_utf8(out.stdout).expect("utf-8"), backend);
    }
}

#[test]
fn the_axum_example_serialises_payments() {
    let server = RedisServer::start();
    for url in [None, Some(server.url())] {
        let out = run_example("axum_orders", &["--demo"], url.as_deref());
        assert_eq!(out.matches("-> 200 OK").count(), 10, "{out}");
        assert!(out.contains("order 42: paid 100 cents"), "{out}");
    }
}

#[test]
fn the_tonic_example_serialises_payments() {
    let out = run_example("tonic_orders", &["--demo"], None);
    assert_eq!(out.matches("Pay(order 7, 25) -> total").count(), 5, "{out}");
    for total in [25, 50, 75, 100, 125] {
        assert!(out.contains(&format!("total {total} ")), "{out}");
    }
}

#[test]
fn the_fencing_example_shows_the_lost_update_and_the_fix() {
    let out = run_example("fencing_postgres", &[], None);
    assert!(out.contains("=> without fencing: 70"), "{out}");
    assert!(
        out.contains("A: write REJECTED: stale fencing token"),
        "{out}"
    );
    assert!(out.contains("=> with fencing: 120"), "{out}");
    // The lock in PostgreSQL itself: the late transaction is refused at
    // its check, with no token column.
    assert!(out.contains("A: write REJECTED: lease on lock"), "{out}");
    assert!(
        out.contains("=> checked in under a PostgreSQL lease: 120"),
        "{out}"
    );
    // And through a sqlx transaction (feature `sqlx`).
    let rounds = if cfg!(feature = "sqlx") {
        assert!(
            out.contains("=> the same through a sqlx transaction: 120"),
            "{out}"
        );
        4
    } else {
        3
    };
    assert_eq!(
        out.matches("lease still held by my clock? false").count(),
        rounds,
        "{out}"
    );
}

/// Runs lockctl with `args`: its exit code, output and error output.
fn lockctl(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(example("lockctl"))
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("LOCK_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("run lockctl");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn lockctl_lists_shows_and_breaks_locks_on_every_store() {
    let redis = RedisServer::start();
    let postgres = lock_testkit::PostgresServer::start();
    #[cfg(feature = "etcd")]
    let etcd = lock_testkit::EtcdServer::start();
    #[cfg(feature = "zookeeper")]
    let zookeeper = lock_testkit::ZooKeeperServer::start();
    #[allow(unused_mut)] // Redis and PostgreSQL only without the examples' store features
    let mut urls = vec![redis.url(), postgres.postgres_url()];
    #[cfg(feature = "etcd")]
    urls.push(lock_testkit::EtcdServer::url(std::slice::from_ref(&etcd)));
    #[cfg(feature = "zookeeper")]
    urls.push(lock_testkit::ZooKeeperServer::url(std::slice::from_ref(
        &zookeeper,
    )));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for url in &urls {
        let (locker, guard) = runtime.block_on(async {
            let locker = lock_core::Locker::builder()
                .label("billing-3")
                .ttl(std::time::Duration::from_secs(3))
                .connect(url)
                .await
                .unwrap();
            let guard = locker.lock("order:7").await.unwrap();
            (locker, guard)
        });
        let (code, out, _) = lockctl(&["--url", url, "list", "order:*"]);
        assert_eq!((code, out.trim()), (Some(0), "order:7"), "{url}");
        let (code, out, _) = lockctl(&["--url", url, "show", "order:7"]);
        assert_eq!(code, Some(0), "{out}");
        let pid = std::process::id();
        assert!(
            out.contains(&format!("exclusive lock held by billing-3/pid {pid}")),
            "{out}"
        );
        assert!(out.contains(&format!("token {}", guard.token())), "{out}");
        let (code, _, err) = lockctl(&["--url", url, "release", "order:7"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("--force"), "{err}");
        let (code, out, err) = lockctl(&["--url", url, "release", "order:7", "--force"]);
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(out.contains("removed 1 holders"), "{out}");
        assert!(
            err.contains("lock force-released"),
            "the warning is logged: {err}"
        );
        runtime.block_on(async {
            let lost = tokio::time::timeout(std::time::Duration::from_secs(10), guard.lost());
            assert!(lost.await.is_ok(), "the holder was not told ({url})");
            drop(guard);
            // Free again (the dropped guard's background release may still
            // hold this Locker's local turn for a moment: waited for).
            let again = locker
                .lock("order:7")
                .wait(std::time::Duration::from_secs(5));
            assert!(again.await.is_ok(), "order:7 stayed held ({url})");
        });
    }
    let (code, _, _) = lockctl(&["show", "order:7"]);
    assert_eq!(code, Some(2), "no URL is a usage error");
}

/// `--help` says what each command does, and a mistyped command is a usage
/// error naming it.
#[test]
fn lockctl_explains_each_command() {
    for command in ["list", "show", "release", "schema"] {
        let (code, out, err) = lockctl(&[command, "--help"]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains(&format!("Usage: lockctl {command}")), "{out}");
    }
    let (_, out, _) = lockctl(&["release", "--help"]);
    assert!(out.contains("--force"), "{out}");
    let (code, _, err) = lockctl(&["shwo", "order:7"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("shwo"), "{err}");
    // The help names LOCK_URL but never shows its value: URLs carry passwords.
    let help = Command::new(example("lockctl"))
        .args(["show", "--help"])
        .env("LOCK_URL", "redis://:hunter2@10.0.0.5:6379")
        .output()
        .expect("run lockctl");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("LOCK_URL"), "{help}");
    assert!(!help.contains("hunter2"), "the password is shown: {help}");
}

/// `lockctl schema` prints, with no store, the DDL of the namespace and
/// the grants of the role it names (run by hand in a test of lock-core's:
/// `the_printed_schema_and_grants_are_all_a_locking_role_needs`).
#[test]
fn lockctl_prints_the_postgres_schema_and_grants() {
    let (code, out, err) = lockctl(&["--namespace", "billing", "schema", "--role", "app"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("CREATE TABLE IF NOT EXISTS \"billing\".leases"),
        "{out}"
    );
    assert!(out.contains("TO \"app\""), "{out}");
    let (code, _, err) = lockctl(&["schema"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--role"), "{err}");
}

/// Each tick of the scheduled job runs on exactly one of the two replicas,
/// the other skipping it.
#[test]
fn the_scheduled_job_runs_once_per_tick() {
    let out = run_example("scheduled_job", &[], None);
    let mut ran: Vec<u64> = out
        .lines()
        .filter(|line| line.contains(": ran on "))
        .map(|line| {
            let tick = line
                .strip_prefix("tick ")
                .and_then(|rest| rest.split(':').next());
            tick.and_then(|n| n.parse().ok()).expect("a tick number")
        })
        .collect();
    ran.sort_unstable();
    assert_eq!(ran, (0..6).collect::<Vec<u64>>(), "{out}");
    assert_eq!(out.matches(": skipped on ").count(), 6, "{out}");
    assert!(!out.contains("failed"), "{out}");
}

/// The relay runs on one replica at a time: replica-a's batches, then,
/// once it stops, replica-b's under a higher token; the observer told both
/// leaders in that order.
#[test]
fn the_outbox_relay_runs_on_one_leader_and_hands_over() {
    let out = run_example("leader", &[], None);
    let sent: Vec<(&str, u64)> = out
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(" sent batch ")?;
            let token = rest.rsplit(' ').next()?.parse().ok()?;
            Some((name, token))
        })
        .collect();
    let mut terms = sent.clone();
    terms.dedup();
    assert_eq!(
        terms.iter().map(|t| t.0).collect::<Vec<_>>(),
        ["replica-a", "replica-b"],
        "not one leader after the other: {out}"
    );
    assert!(terms[0].1 < terms[1].1, "{out}");
    let told: Vec<String> = out
        .lines()
        .filter(|line| line.starts_with("leader: replica-"))
        .map(|line| format!("{} {}", terms_name(line), token_of(line)))
        .collect();
    let expected: Vec<String> = terms.iter().map(|(n, t)| format!("{n} {t}")).collect();
    assert_eq!(told, expected, "{out}");
}

fn terms_name(line: &str) -> &str {
    line.trim_start_matches("leader: ")
        .split(' ')
        .next()
        .unwrap_or_default()
}

fn token_of(line: &str) -> &str {
    line.rsplit("token ")
        .next()
        .unwrap_or_default()
        .trim_end_matches(')')
}
