//! The demo runs as README.md says: on the embedded backend without
//! `REDIS_URL`, on Redis with it.

use std::path::PathBuf;
use std::process::Command;

use lock_testkit::RedisServer;

/// `target/<profile>/examples/quickstart`, built by `cargo test` beside this test.
fn quickstart() -> PathBuf {
    let exe = std::env::current_exe().expect("test path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let path = profile_dir.join("examples").join("quickstart");
    assert!(
        path.exists(),
        "{} is not built; run `cargo test --workspace`",
        path.display()
    );
    path
}

fn run(redis_url: Option<&str>) -> String {
    let mut command = Command::new(quickstart());
    command.env_remove("REDIS_URL");
    if let Some(url) = redis_url {
        command.env("REDIS_URL", url);
    }
    let out = command.output().expect("run quickstart");
    assert!(out.status.success(), "quickstart failed: {out:?}");
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
        stdout.contains("as expected: lock `order:41` is held"),
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
