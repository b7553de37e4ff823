//! Redis Cluster (3 masters, 3 replicas): locks spread over every master,
//! and a held lock, its waiter and its token line live through a failover
//! of the master that serves it.

use std::collections::HashSet;
use std::time::Duration;

use lock_core::{LockError, Locker};
use lock_testkit::ClusterSet;
use tokio::time::Instant;

use crate::conformance::SLACK;

/// Locks on many keys land on all three masters, each held once, and
/// leave nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_spread_over_every_master() {
    let cluster = ClusterSet::start();
    let locker = Locker::redis(&cluster.url()).await.unwrap();
    let other = Locker::redis(&cluster.url()).await.unwrap();
    let mut held = Vec::new();
    let mut masters = HashSet::new();
    for i in 0..30 {
        let key = format!("order:{i}");
        let lease = locker.stored_keys(&key).unwrap().lease().to_owned();
        masters.insert(cluster.master_of(&lease).await.port());
        held.push(locker.lock(&key).await.unwrap());
        assert!(
            other.try_lock(&key).await.unwrap().is_none(),
            "{key}: two owners"
        );
    }
    assert_eq!(masters.len(), 3, "the keys did not spread over the masters");
    for guard in held {
        guard.release().await.unwrap();
    }
    lock_testkit::assert_nothing_left(cluster.nodes()).await;
}

/// `CLUSTER FAILOVER` of the master that serves a held lock: the lock is
/// still held a ttl later (renewals follow the slot to the promoted
/// replica), a waiter is woken by its release and gets a higher token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_of_the_slot_master_keeps_the_lock_and_its_token_line() {
    let cluster = ClusterSet::start();
    // Longer than the writes a manual failover may hold up (5 s at most).
    let ttl = Duration::from_secs(8);
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let locker = Locker::builder()
        .ttl(ttl)
        .redis_cluster(&urls)
        .await
        .unwrap();
    let waiter = Locker::redis(&cluster.url()).await.unwrap();
    let held = locker.lock("order:42").await.unwrap();
    let before = held.token();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("order:42").wait(Duration::from_secs(60)).await;
        (guard, Instant::now())
    });
    let lease = locker.stored_keys("order:42").unwrap().lease().to_owned();
    let old = cluster.master_of(&lease).await.port();
    let new = cluster.fail_over(&lease).await;
    assert_ne!(new, old);
    tokio::time::sleep(ttl + SLACK).await;
    if !held.is_held() {
        let why = tokio::time::timeout(Duration::from_millis(100), held.lost()).await;
        panic!("the lock was lost in the failover (old {old}, new {new}): {why:?}");
    }
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard, woken) = waiting.await.unwrap();
    let guard = guard.unwrap_or_else(|err| {
        let chain = lock_testkit::error_chain(&err);
        panic!("the waiter did not get the lock after the failover: {chain}")
    });
    assert!(
        woken - released < ttl,
        "the waiter was not woken: {:?}",
        woken - released
    );
    assert!(
        guard.token() > before,
        "the token went back in the failover"
    );
    guard.release().await.unwrap();
}

/// The slot of a held lock moves to another master while a waiter waits:
/// half-moved, no second owner gets in (a try is refused or answered
/// TRYAGAIN until the keys move); once moved, the lock is still held
/// a ttl later (renewals follow the slot), the waiter is woken by the
/// release and gets a higher token, and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_moving_under_a_held_lock_keeps_it_and_its_waiter() {
    let cluster = ClusterSet::start();
    let ttl = Duration::from_secs(3);
    let locker = Locker::builder()
        .ttl(ttl)
        .redis(&cluster.url())
        .await
        .unwrap();
    // Half-moved, a lock's scripts are answered TRYAGAIN (a lease key on
    // the source, its token record not) until its keys have moved: a short
    // timeout ends a try then.
    let other = Locker::builder()
        .timeout(Duration::from_millis(300))
        .redis(&cluster.url())
        .await
        .unwrap();
    let waiter = Locker::redis(&cluster.url()).await.unwrap();
    let held = locker.lock("order:7").await.unwrap();
    let before = held.token();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("order:7").wait(Duration::from_secs(60)).await;
        (guard, Instant::now())
    });
    let lease = locker.stored_keys("order:7").unwrap().lease().to_owned();
    let old = cluster.master_of(&lease).await.port();
    let half_moved = async {
        match other.try_lock("order:7").await {
            Ok(None) | Err(LockError::Unavailable { .. }) => {}
            Ok(Some(_)) => panic!("a second owner while the slot moved"),
            Err(err) => panic!("{err}"),
        }
    };
    let new = cluster.migrate_slot(&lease, half_moved).await;
    assert_ne!(new, old);
    assert!(
        other.try_lock("order:7").await.unwrap().is_none(),
        "a second owner after the slot moved"
    );
    tokio::time::sleep(ttl + SLACK).await;
    assert!(held.is_held(), "the lock was lost when its slot moved");
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard, woken) = waiting.await.unwrap();
    let guard = guard.unwrap_or_else(|err| {
        let chain = lock_testkit::error_chain(&err);
        panic!("the waiter did not get the lock after the move: {chain}")
    });
    assert!(woken - released < ttl, "the waiter was not woken");
    assert!(
        guard.token() > before,
        "the token went back when the slot moved"
    );
    guard.release().await.unwrap();
    lock_testkit::assert_nothing_left(cluster.nodes()).await;
}

/// `replicas(..)` is refused on a cluster (its `WAIT` has no slot to go
/// to yet), with an error that says so, and leaves no lock behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_confirmation_is_refused_on_a_cluster() {
    let cluster = ClusterSet::start();
    let locker = Locker::builder()
        .replicas(1, Duration::from_millis(500))
        .redis(&cluster.url())
        .await
        .unwrap();
    let err = locker.lock("k").await.unwrap_err();
    let chain = lock_testkit::error_chain(&err);
    assert!(chain.contains("not supported on Redis Cluster"), "{chain}");
    assert!(!matches!(err, LockError::ReplicasNotConfirmed { .. }));
    let other = Locker::redis(&cluster.url()).await.unwrap();
    assert!(
        other.try_lock("k").await.unwrap().is_some(),
        "a lock was left"
    );
}
