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

#[cfg(feature = "metrics")]
/// The body of `GET /metrics` at `addr` (`host:port`).
fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the example");
    write!(stream, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.0 200"), "{head}");
    body.to_owned()
}

#[cfg(feature = "metrics")]
/// The samples of an exposition, `name{labels}` to value.
fn samples(exposition: &str) -> std::collections::HashMap<String, f64> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("a sample");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

#[cfg(feature = "metrics")]
/// The metric names the dashboard's queries use.
fn graphed() -> Vec<String> {
    let text = include_str!("../../docs/grafana-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let mut exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|panel| panel["targets"].as_array().expect("targets").clone())
        .map(|target| target["expr"].as_str().expect("expr").to_owned())
        .collect();
    exprs.push(
        dashboard["templating"]["list"][0]["definition"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let mut names: Vec<String> = exprs
        .iter()
        .flat_map(|expr| {
            expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|word| word.starts_with("lock_"))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The metrics example serves, at `/metrics`, every series the Grafana
/// dashboard in docs/ graphs, each with a value its workload explains.
#[cfg(feature = "metrics")]
#[test]
fn the_metrics_example_serves_every_series_the_dashboard_graphs() {
    let program = example("metrics");
    let mut example =
        lock_testkit::Process::spawn(program.to_str().unwrap(), &["--demo".to_owned()]);
    let first = example.line();
    let addr = first
        .strip_prefix("serving http://")
        .and_then(|rest| rest.split_once("/metrics"))
        .map(|(addr, _)| addr.to_owned())
        .unwrap_or_else(|| panic!("the metrics example said {first:?}"));
    loop {
        let line = example.line();
        assert!(
            !line.is_empty(),
            "the metrics example ended before its round"
        );
        if line == "round 1 done" {
            break;
        }
    }
    let seen = samples(&scrape(&addr));
    let value = |series: &str| {
        *seen
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in {seen:#?}"))
    };

    let names = graphed();
    assert!(names.len() >= 8, "{names:?}");
    for name in &names {
        let found = seen
            .iter()
            .filter(|(series, _)| series.split('{').next() == Some(name.as_str()));
        assert!(
            found.clone().count() > 0,
            "the dashboard graphs {name}, not served: {seen:#?}"
        );
        assert!(
            found.map(|(_, v)| *v).sum::<f64>() > 0.0,
            "{name} is all zero"
        );
    }
    // What one round does: 40 payments on two orders, a job tick on two
    // replicas, a wait that runs out, a lease that ends, a stale token.
    assert_eq!(value(r#"lock_acquired_total{prefix="order"}"#), 41.0);
    assert_eq!(value(r#"lock_skipped_total{prefix="job"}"#), 1.0);
    assert_eq!(value(r#"lock_wait_timeouts_total{prefix="order"}"#), 1.0);
    assert_eq!(
        value(r#"lock_lost_total{reason="not_renewed_in_time"}"#),
        1.0
    );
    assert_eq!(value(r#"lock_fence_refused_total{check="request"}"#), 1.0);
    assert_eq!(value(r#"lock_wait_seconds_count{prefix="order"}"#), 41.0);
    assert_eq!(
        value(r#"lock_wait_seconds_bucket{prefix="order",le="+Inf"}"#),
        41.0
    );
    let acquired: f64 = ["order", "job", "session"]
        .iter()
        .map(|p| value(&format!(r#"lock_acquired_total{{prefix="{p}"}}"#)))
        .sum();
    let held_now = acquired
        - value("lock_released_total")
        - value(r#"lock_lost_total{reason="not_renewed_in_time"}"#);
    assert_eq!(held_now, 0.0, "every lock of the round ended");
}
