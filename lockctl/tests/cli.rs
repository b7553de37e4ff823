//! lockctl as an operator runs it: the built binary, against real servers
//! from the test kit, every command on Redis, PostgreSQL and ZooKeeper (a
//! store of lockctl's default build).

use std::process::Command;
use std::time::Duration;

use lock_core::{LockGuard, Locker};
use lock_testkit::{PostgresServer, Process, RedisServer, ZooKeeperServer};
use serde_json::Value;

/// What one run of lockctl gave: exit code, output, error output.
struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockctl"));
    command
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("LOCK_URL")
        .env_remove("RUST_LOG");
    command
}

fn lockctl(args: &[&str]) -> Run {
    let out = command(args).output().expect("run lockctl");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let run = Run {
        code: out.status.code(),
        out: text(&out.stdout),
        err: text(&out.stderr),
    };
    // Output for people fits 80 columns (JSON, SQL and scripts are not
    // for reading).
    let for_people = !args
        .iter()
        .any(|a| matches!(*a, "--json" | "schema" | "completions"));
    for line in run.out.lines().filter(|_| for_people) {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }
    assert!(
        !run.err.contains('\x1b'),
        "colour codes into a pipe: {}",
        run.err
    );
    run
}

fn json(run: &Run) -> Value {
    assert_eq!(run.out.lines().count(), 1, "one document: {}", run.out);
    serde_json::from_str(&run.out).unwrap_or_else(|e| panic!("{e}: {}", run.out))
}

/// Runs `watch` for 3 frames, a second apart, and hands `key` to a new
/// holder after the first: what it printed.
fn watch_a_handoff(
    url: &str,
    runtime: &tokio::runtime::Runtime,
    locker: &Locker,
    key: &str,
    first: LockGuard,
) -> (String, LockGuard) {
    let args = ["--url", url, "watch", "order:*", "--count", "3"].map(String::from);
    // Killed if the test fails before it ends.
    let mut watch = Process::spawn(env!("CARGO_BIN_EXE_lockctl"), &args);
    let mut shown = String::new();
    // The first frame ends with the legend.
    loop {
        let line = watch.line();
        shown.push_str(&line);
        shown.push('\n');
        if line.starts_with("WAIT:") || line.is_empty() {
            break;
        }
    }
    let next = runtime.block_on(async {
        first.release().await.unwrap();
        locker.lock(key).await.unwrap()
    });
    shown.push_str(&watch.finish());
    (shown, next)
}

/// Every command against the store at `url`.
fn every_command(url: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let pid = std::process::id();
    let locker = runtime.block_on(async {
        Locker::builder()
            .label("billing-3")
            .ttl(Duration::from_secs(3))
            .connect(url)
            .await
            .unwrap()
    });
    let guard = runtime
        .block_on(async { locker.lock("order:7").await })
        .unwrap();

    let run = lockctl(&["--url", url, "list", "order:*"]);
    assert_eq!(
        (run.code, run.out.as_str()),
        (Some(0), "order:7\n"),
        "{}",
        run.err
    );
    let listed = json(&lockctl(&["--url", url, "list", "order:*", "--json"]));
    assert_eq!(listed["keys"], serde_json::json!(["order:7"]), "{listed}");
    assert_eq!(listed["pattern"], "order:*");

    let run = lockctl(&["--url", url, "show", "order:7"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(run.out.starts_with("order:7: held\nKIND "), "{}", run.out);
    let row = run.out.lines().nth(2).unwrap();
    assert!(row.starts_with("exclusive"), "{}", run.out);
    assert!(row.contains(&guard.token().to_string()), "{}", run.out);
    assert!(
        row.ends_with(&format!("billing-3/pid {pid}")),
        "{}",
        run.out
    );
    assert!(run.out.contains("waiters: "), "{}", run.out);
    let run = lockctl(&["--url", url, "show", "order:7", "--json"]);
    let shown = json(&run);
    assert_eq!(run.code, Some(0));
    assert_eq!(shown["key"], "order:7");
    assert_eq!(shown["held"], true);
    let holder = &shown["holders"][0];
    assert_eq!(holder["kind"], "exclusive");
    assert_eq!(holder["token"], guard.token().get());
    assert_eq!(holder["label"], "billing-3");
    assert_eq!(holder["process"], format!("billing-3/pid {pid}"));
    assert!(holder["owner"].as_str().unwrap().starts_with("billing-3:"));
    if let Some(left) = holder["remaining_ms"].as_u64() {
        assert!(left <= 3_000, "{shown}");
    }
    assert_eq!(shown["waiters"]["queued"], 0, "{shown}");

    let run = lockctl(&["--url", url, "show", "order:8"]);
    assert_eq!(
        (run.code, run.out.lines().next()),
        (Some(3), Some("order:8: not held"))
    );
    let run = lockctl(&["--url", url, "show", "order:8", "--json"]);
    assert_eq!(
        (run.code, &json(&run)["held"]),
        (Some(3), &Value::Bool(false))
    );

    // A fair lock's waiter, listed in line with its process.
    let (waiting, holder) = runtime.block_on(async {
        let holder = locker.fair_lock("order:busy").await.unwrap();
        let other = Locker::builder()
            .label("billing-4")
            .connect(url)
            .await
            .unwrap();
        let waiting = tokio::spawn(async move {
            other
                .fair_lock("order:busy")
                .wait(Duration::from_secs(30))
                .await
        });
        (waiting, holder)
    });
    let since = std::time::Instant::now();
    let listed = loop {
        let shown = json(&lockctl(&["--url", url, "show", "order:busy", "--json"]));
        if shown["waiters"]["queued"] == 1 {
            break shown;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "never queued: {shown}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let waiter = &listed["waiters"]["queue"][0];
    assert_eq!(waiter["kind"], "fair", "{listed}");
    assert_eq!(
        waiter["process"],
        format!("billing-4/pid {pid}"),
        "{listed}"
    );
    let run = lockctl(&["--url", url, "show", "order:busy"]);
    assert!(
        run.out.contains(&format!(
            "IN LINE  KIND  PROCESS\n1        fair  billing-4/pid {pid}\n"
        )),
        "{}",
        run.out
    );
    runtime.block_on(async {
        holder.release().await.unwrap();
        waiting.await.unwrap().unwrap().release().await.unwrap();
    });

    // An election: no leader, then one.
    let run = lockctl(&["--url", url, "leader", "scheduler"]);
    assert_eq!(
        (run.code, run.out.as_str()),
        (Some(3), "scheduler: no leader\n")
    );
    let run = lockctl(&["--url", url, "leader", "scheduler", "--json"]);
    assert_eq!(
        json(&run),
        serde_json::json!({"key": "scheduler", "leader": null})
    );
    let leadership = runtime
        .block_on(async { locker.election("scheduler").value("10.0.0.7:8080").await })
        .unwrap();
    let run = lockctl(&["--url", url, "leader", "scheduler"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(
        run.out
            .starts_with(&format!("scheduler: led by billing-3/pid {pid}\n")),
        "{}",
        run.out
    );
    assert!(run.out.contains("value  10.0.0.7:8080"), "{}", run.out);
    let run = lockctl(&["--url", url, "leader", "scheduler", "--json"]);
    let leader = &json(&run)["leader"];
    assert_eq!(leader["value"], "10.0.0.7:8080");
    assert_eq!(leader["token"], leadership.token().get());
    assert_eq!(leader["label"], "billing-3");
    runtime.block_on(leadership.resign()).unwrap();

    // A live view that sees the holder change.
    let (shown, guard) = watch_a_handoff(url, &runtime, &locker, "order:7", guard);
    assert_eq!(
        shown.matches("watch order:*   frame ").count(),
        3,
        "{shown}"
    );
    let later = shown.split("frame 2").nth(1).expect("a second frame");
    assert!(later.contains("new holder"), "{shown}");
    assert!(later.contains(&guard.token().to_string()), "{shown}");
    for line in shown.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }

    // Breaking the lock: refused without --force, then done and told.
    let run = lockctl(&["--url", url, "release", "order:7"]);
    assert_eq!(run.code, Some(2), "{}", run.err);
    assert!(run.err.contains("--force"), "{}", run.err);
    assert!(
        runtime
            .block_on(locker.inspect("order:7"))
            .unwrap()
            .is_held()
    );
    let run = lockctl(&["--url", url, "release", "order:7", "--force"]);
    assert_eq!(run.code, Some(0), "{}{}", run.out, run.err);
    assert!(
        run.out.contains(&guard.token().to_string()),
        "what it removed: {}",
        run.out
    );
    assert!(
        run.out.contains("order:7: removed 1 holders"),
        "{}",
        run.out
    );
    assert!(
        run.err.contains("lock force-released"),
        "the warning is logged: {}",
        run.err
    );
    runtime.block_on(async {
        let lost = tokio::time::timeout(Duration::from_secs(10), guard.lost());
        assert!(lost.await.is_ok(), "the holder was not told ({url})");
    });
    let run = lockctl(&["--url", url, "release", "order:7", "--force"]);
    assert_eq!(
        (run.code, run.out.as_str()),
        (Some(3), "order:7: not held; nothing removed\n")
    );
    assert!(
        !run.err.contains("force-released"),
        "nothing was: {}",
        run.err
    );
}

#[test]
fn every_command_on_redis() {
    let server = RedisServer::start();
    every_command(&server.url());
    watch_ends_on_ctrl_c(&server.url());
    urls_from_the_environment_and_namespaces(&server.url());
    a_closed_pipe_ends_a_command_quietly(&server.url());
}

/// `LOCK_URL`, else `REDIS_URL`, names the store; `--namespace` reads
/// another namespace's locks, and only those.
fn urls_from_the_environment_and_namespaces(url: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let billing = runtime
        .block_on(Locker::builder().namespace("billing").connect(url))
        .unwrap();
    let held = runtime
        .block_on(async { billing.lock("invoice:3").await })
        .unwrap();
    let with_env = |var: &str, args: &[&str]| {
        let out = command(args).env(var, url).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let listed = with_env("LOCK_URL", &["--namespace", "billing", "list", "*"]);
    assert_eq!(listed, (Some(0), "invoice:3\n".to_owned()));
    let listed = with_env("REDIS_URL", &["--namespace", "billing", "list", "*"]);
    assert_eq!(listed, (Some(0), "invoice:3\n".to_owned()));
    let elsewhere = with_env("LOCK_URL", &["show", "invoice:3"]);
    assert_eq!(
        elsewhere.0,
        Some(3),
        "the default namespace has no such lock"
    );
    runtime.block_on(held.release()).unwrap();
}

/// Output into a pipe already closed (`lockctl list | head -0`) ends the
/// command as done, not with a panic.
fn a_closed_pipe_ends_a_command_quietly(url: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let held = runtime
        .block_on(async { Locker::connect(url).await?.lock("pipe:1").await })
        .unwrap();
    for args in [&["--url", url, "list", "*"][..], &["completions", "bash"]] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = command(args).stdout(writer).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    runtime.block_on(held.release()).unwrap();
}

/// A watch without `--count` runs until Ctrl-C (SIGINT), and then ends
/// as done.
fn watch_ends_on_ctrl_c(url: &str) {
    let args = ["--url", url, "watch", "order:*", "--every", "0.2"].map(String::from);
    let mut watch = Process::spawn(env!("CARGO_BIN_EXE_lockctl"), &args);
    assert!(watch.line().starts_with("watch order:*   frame 1"));
    let interrupted = Command::new("kill")
        .args(["-INT", &watch.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    // `finish` asserts a successful exit; without the handler SIGINT ends
    // the process as killed, and without the signal it runs on (ended by
    // nextest's timeout).
    watch.finish();
}

#[test]
fn every_command_on_postgres() {
    let server = PostgresServer::start();
    let url = server.postgres_url();
    // lockctl makes no tables: before any Locker made them, it is told
    // what to run.
    for _ in 0..2 {
        let run = lockctl(&["--url", &url, "show", "order:7"]);
        assert_eq!(run.code, Some(1), "{}{}", run.out, run.err);
        assert!(run.err.contains("lockctl schema"), "{}", run.err);
    }
    every_command(&url);
}

#[test]
fn every_command_on_zookeeper() {
    let server = ZooKeeperServer::start();
    let url = format!(
        "{}/payments",
        ZooKeeperServer::url(std::slice::from_ref(&server))
    );
    // lockctl makes no chroot: a missing one is an error, each time.
    for _ in 0..2 {
        let run = lockctl(&["--url", &url, "show", "order:7"]);
        assert_eq!(run.code, Some(1), "{}{}", run.out, run.err);
        assert!(run.err.contains("no chroot `/payments`"), "{}", run.err);
    }
    every_command(&url);
}

/// `--help` on every command, the usage errors, completions, and a store
/// that cannot be reached.
#[test]
fn usage_help_and_errors() {
    for command in [
        "list",
        "show",
        "leader",
        "watch",
        "release",
        "schema",
        "completions",
    ] {
        let run = lockctl(&[command, "--help"]);
        assert_eq!(run.code, Some(0), "{}", run.err);
        assert!(
            run.out.contains(&format!("Usage: lockctl {command}")),
            "{}",
            run.out
        );
    }
    let run = lockctl(&["--help"]);
    assert!(
        run.out.contains("3 the key is not held"),
        "exit codes: {}",
        run.out
    );
    let run = lockctl(&["shwo", "order:7"]);
    assert_eq!(run.code, Some(2), "{}", run.err);
    assert!(run.err.contains("shwo"), "{}", run.err);
    let run = lockctl(&["show", "order:7"]);
    assert_eq!(run.code, Some(2), "no URL is a usage error: {}", run.err);
    let run = lockctl(&["--url", "redis://127.0.0.1:9", "watch", "x", "--every", "0"]);
    assert_eq!(run.code, Some(2), "{}", run.err);
    assert!(run.err.contains("between 0.1 and 3600"), "{}", run.err);
    // The help names LOCK_URL but never shows its value: URLs carry passwords.
    let help = command(&["show", "--help"])
        .env("LOCK_URL", "redis://:hunter2@10.0.0.5:6379")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("LOCK_URL") && !help.contains("hunter2"),
        "{help}"
    );

    let run = lockctl(&["completions", "bash"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(run.out.contains("_lockctl()"), "{}", run.out);
    // Output that cannot be written (a full disk) is an error, unlike a
    // closed pipe.
    let full = std::fs::File::create("/dev/full").unwrap();
    let out = command(&["completions", "bash"])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("the output could not be written"), "{err}");

    for url in ["redis://127.0.0.1:9", "nats://127.0.0.1:4222"] {
        let run = lockctl(&["--url", url, "show", "order:7"]);
        assert_eq!(run.code, Some(1), "{url}: {}", run.err);
        assert!(run.err.starts_with("error: "), "{}", run.err);
    }
}

#[test]
fn schema_prints_the_ddl_and_grants() {
    let run = lockctl(&["--namespace", "billing", "schema", "--role", "locker"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(
        run.out
            .contains("CREATE TABLE IF NOT EXISTS \"billing\".leases"),
        "{}",
        run.out
    );
    assert!(run.out.contains("TO \"locker\""), "{}", run.out);
    let run = lockctl(&["schema"]);
    assert_eq!(run.code, Some(2), "{}", run.err);
    assert!(run.err.contains("--role"), "{}", run.err);
    let run = lockctl(&["schema", "--role", "locker", "--mysql", "app"]);
    assert_eq!(run.code, Some(0), "{}", run.err);
    assert!(
        run.out.contains("ON `app`.`lock_leases` TO 'locker';"),
        "{}",
        run.out
    );
    let run = lockctl(&["--namespace", "x y", "schema", "--role", "locker"]);
    assert_eq!(run.code, Some(2), "{}", run.out);
    assert!(run.err.starts_with("error: "), "{}", run.err);
    assert!(
        run.err.contains("namespace"),
        "names what is wrong: {}",
        run.err
    );
}
