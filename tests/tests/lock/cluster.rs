//! Redis Cluster (3 masters, 3 replicas): locks spread over every master,
//! and a held lock, its waiter and its token line live through a failover
//! of the master that serves it.

use std::collections::HashSet;
use std::time::Duration;

use lock_core::{LockError, Locker};
use lock_testkit::{ClusterSet, RedisServer, release_channel};
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
    // The old node let the channel go with the slot: the waiter listens
    // on the new one.
    let channel = release_channel(&locker.stored_keys("order:7").unwrap());
    shard_subscribers_reach(cluster.node(new), &channel, 1).await;
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

/// A waiter listens on the shard channel of its lock, on the node of the
/// lock's slot alone (`SSUBSCRIBE`, no plain subscription anywhere), and
/// the release (`SPUBLISH` there) wakes it long before the holder's ttl
/// would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_woken_through_the_shard_channel() {
    let cluster = ClusterSet::start();
    let ttl = Duration::from_secs(30);
    let locker = Locker::builder()
        .ttl(ttl)
        .redis(&cluster.url())
        .await
        .unwrap();
    let waiter = Locker::redis(&cluster.url()).await.unwrap();
    let held = locker.lock("order:42").await.unwrap();
    let keys = locker.stored_keys("order:42").unwrap();
    let master = cluster.master_of(keys.lease()).await;
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("order:42").wait(Duration::from_secs(60)).await;
        (guard, Instant::now())
    });
    shard_subscribers_reach(master, &release_channel(&keys), 1).await;
    for node in cluster.nodes() {
        let mut conn = node.connection().await;
        let plain: (String, usize) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(release_channel(&keys))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(plain.1, 0, "a plain subscription on {}", node.port());
    }
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard, woken) = waiting.await.unwrap();
    let guard = guard.unwrap();
    assert!(
        woken - released < Duration::from_secs(5),
        "the waiter was not woken by the release: {:?}",
        woken - released
    );
    let mut conn = master.connection().await;
    assert_eq!(lock_testkit::command_calls(&mut conn, "spublish").await, 1);
    for node in cluster.nodes() {
        let mut conn = node.connection().await;
        let published = lock_testkit::command_calls(&mut conn, "publish").await;
        assert_eq!(published, 0, "a plain PUBLISH on {}", node.port());
    }
    guard.release().await.unwrap();
}

/// Waits until `node` counts `wanted` shard subscribers of `channel`
/// (polled: a subscription made in another task has no event a test can
/// follow).
pub(crate) async fn shard_subscribers_reach(node: &RedisServer, channel: &str, wanted: usize) {
    let mut conn = node.connection().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, count): (String, usize) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(channel)
            .query_async(&mut conn)
            .await
            .unwrap();
        if count == wanted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{channel} has {count} shard subscribers on {}, not {wanted}",
            node.port()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `replicas(1, ..)` on a cluster: `WAIT` goes to the master of the
/// lock's slot and counts its replica. A lock is granted once that
/// replica has it; with the replica frozen it is refused at the bound
/// and its lease given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_confirmation_reaches_the_master_of_the_slot() {
    let cluster = ClusterSet::start();
    // Generous: a replica of a loaded machine once took more than 500 ms.
    let within = Duration::from_secs(2);
    let locker = Locker::builder()
        .replicas(1, within)
        .redis(&cluster.url())
        .await
        .unwrap();
    let mut masters = HashSet::new();
    for i in 0..12 {
        let key = format!("order:{i}");
        let lease = locker.stored_keys(&key).unwrap().lease().to_owned();
        masters.insert(cluster.master_of(&lease).await.port());
        cluster.replica_of(&lease).await;
        let guard = locker.lock(&key).await.unwrap_or_else(|err| {
            let chain = lock_testkit::error_chain(&err);
            panic!("{key} was not confirmed: {chain}")
        });
        guard.release().await.unwrap();
    }
    assert_eq!(masters.len(), 3, "the keys did not spread over the masters");
    let lease = locker.stored_keys("frozen").unwrap().lease().to_owned();
    let replica = cluster.replica_of(&lease).await;
    replica.pause();
    let started = Instant::now();
    let err = locker.lock("frozen").await.unwrap_err();
    let waited = started.elapsed();
    replica.resume();
    assert!(
        matches!(err, LockError::ReplicasNotConfirmed { confirmed: 0, .. }),
        "{}",
        lock_testkit::error_chain(&err)
    );
    assert!(waited >= within, "gave up after {waited:?}");
    lock_testkit::assert_nothing_left(cluster.nodes()).await;
}
