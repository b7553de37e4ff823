//! The fair lock, the read-write lock and the semaphore between OS
//! processes on one Redis: exclusion and order across processes, and
//! processes killed while waiting or holding.

use std::time::Duration;

use lock_core::Locker;
use lock_testkit::{Process, RedisServer};
use redis::AsyncCommands;
use tokio::time::Instant;

use crate::conformance::SLACK;
use crate::redis_only::{contenders, no_lock_keys_left};

/// Fields of the fair queue of `key` in the store (its `#` counter too).
async fn queue_len(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> usize {
    conn.hlen(format!("lock:{{{key}}}:fair")).await.unwrap()
}

/// Waits until the fair queue of `key` has `fields` fields.
async fn queue_reaches(conn: &mut redis::aio::MultiplexedConnection, key: &str, fields: usize) {
    let reached = async {
        while queue_len(conn, key).await < fields {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reached)
        .await
        .expect("the waiter never queued");
}

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

/// 3 processes x 4 tasks line up in a known order (each process once the
/// one before has its tickets in the store): grants follow that order, a
/// process's requests together, not one per process in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_grants_follow_arrival_across_processes() {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let locker = Locker::redis(&server.url()).await.unwrap();
    let held = locker.fair_lock("fifo").await.unwrap();
    // The holder and the `#` counter.
    let mut fields = queue_len(&mut conn, "fifo").await;
    let mut waiters = Vec::new();
    for name in ["a", "b", "c"] {
        let args = [
            server.url(),
            "fifo".into(),
            name.into(),
            "4".into(),
            "30000".into(),
        ];
        let mut waiter = Process::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
        assert_eq!(waiter.line(), "lined up");
        // Every task's own ticket (none waits behind another locally).
        fields += 4;
        queue_reaches(&mut conn, "fifo", fields).await;
        waiters.push(waiter);
    }
    held.release().await.unwrap();
    for waiter in waiters {
        waiter.finish();
    }
    let order: Vec<String> = conn.lrange("order", 0, -1).await.unwrap();
    let expected: Vec<String> = ["a", "b", "c"]
        .into_iter()
        .flat_map(|p| (1..=4).map(move |i| format!("{p}{i}")))
        .collect();
    assert_eq!(order, expected);
    no_lock_keys_left(&mut conn).await;
}

/// A waiter process killed in the queue delays it by at most its ticket's
/// lease: the next waiter gets the lock within that ttl of the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_fair_waiter_process_delays_the_queue_by_its_ttl_at_most() {
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let ttl = Duration::from_millis(1500);
    let locker = Locker::redis(&server.url()).await.unwrap();
    let held = locker.fair_lock("line").await.unwrap();
    let fields = queue_len(&mut conn, "line").await;
    let args = [
        server.url(),
        "line".into(),
        "dead".into(),
        "1".into(),
        ttl.as_millis().to_string(),
    ];
    let mut dead = Process::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args);
    assert_eq!(dead.line(), "lined up");
    queue_reaches(&mut conn, "line", fields + 1).await;
    dead.kill();
    let killed = Instant::now();
    // The next waiter, behind the dead one's ticket.
    let next = Locker::redis(&server.url()).await.unwrap();
    let waiting =
        tokio::spawn(async move { next.fair_lock("line").wait(Duration::from_secs(30)).await });
    queue_reaches(&mut conn, "line", fields + 2).await;
    held.release().await.unwrap();
    let guard = tokio::time::timeout(ttl + SLACK * 2, waiting)
        .await
        .expect("the dead waiter blocked the queue past its ticket's lease")
        .unwrap()
        .unwrap();
    let after = killed.elapsed();
    assert!(after <= ttl + SLACK, "served {after:?} after the kill");
    guard.release().await.unwrap();
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
