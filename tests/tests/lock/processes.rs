//! The fair lock, the read-write lock and the semaphore between OS
//! processes on one Redis: exclusion across processes, and a process killed
//! while holding. (Order across processes, and a waiter process killed, are
//! in the conformance suite: `conformance/fair.rs`.)

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::{Process, RedisServer};
use redis::AsyncCommands;
use tokio::time::Instant;

use crate::conformance::SLACK;
use crate::redis_only::{contenders, no_lock_keys_left};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_and_read_write_locks_exclude_across_processes() {
    let server = RedisServer::start();
    let (processes, keys, tasks, millis) = (3, 1, 4, 2000);
    let mut conn = server.connection().await;
    // Fair: mutual exclusion, no lost update.
    let mut args = [keys, tasks, millis].map(|n: u64| n.to_string()).to_vec();
    args.push("fair".into());
    let (ops, violations, _) = contenders(&server, processes, &args);
    let counted: u64 = conn.get("counter:0").await.unwrap();
    assert!(ops > 50, "too little contention to mean anything: {ops}");
    assert_eq!(violations, 0, "two fair holders inside at once");
    assert_eq!(counted, ops, "lost updates under the fair lock");
    // Read-write: no reader beside a writer, and readers shared.
    let _: () = conn.del("counter:0").await.unwrap();
    *args.last_mut().unwrap() = "rw".into();
    let (ops, violations, most) = contenders(&server, processes, &args);
    assert!(ops > 50, "too little contention to mean anything: {ops}");
    assert_eq!(violations, 0, "a reader beside a writer, or two writers");
    assert!(most > 1, "readers of different processes never shared");
    no_lock_keys_left(&mut conn).await;
}

/// A semaphore holder process killed while holding: its permit returns at
/// its ttl, and nothing is left once the others release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_semaphore_holder_process_frees_its_permit_at_its_ttl() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(800);
    let args = [
        server.url(),
        "pool".into(),
        ttl.as_millis().to_string(),
        "2".into(),
    ];
    let mut holder = Process::spawn(env!("CARGO_BIN_EXE_holder"), &args);
    let token: u64 = holder
        .line()
        .strip_prefix("token=")
        .expect("token line")
        .parse()
        .unwrap();
    let locker = Locker::redis(&server.url()).await.unwrap();
    let other = locker.semaphore("pool", 2).await.unwrap();
    assert!(locker.try_semaphore("pool", 2).await.unwrap().is_none());
    holder.kill();
    let killed = Instant::now();
    let back = locker
        .semaphore("pool", 2)
        .wait(Duration::from_secs(10))
        .await
        .unwrap();
    let after = killed.elapsed();
    assert!(
        after <= ttl + SLACK,
        "the permit came back {after:?} after the kill"
    );
    assert!(back.token().get() > token);
    back.release().await.unwrap();
    other.release().await.unwrap();
    let mut conn = server.connection().await;
    no_lock_keys_left(&mut conn).await;
}
