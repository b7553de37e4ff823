//! Failovers under Sentinel: 1 master, 2 replicas and 3 sentinels (quorum
//! 2). Locks acknowledged by every replica the sentinels may promote
//! (`replicas(2, ..)`) live through a failover, renewals and waiters follow the new master, new acquires
//! work on it once the sentinels name it, and tokens keep rising. A
//! failover the Locker did not hear of is found by a broken connection, a
//! `READONLY` answer or an unanswered request.

use std::time::Duration;

use lock_core::{LockError, LockGuard, Locker};
use lock_testkit::{DelayProxy, MASTER_NAME, SentinelSet, error_chain};
use redis::AsyncCommands;
use tokio::time::Instant;

use crate::conformance::SLACK;

/// The Locker's bound on a request (the default).
const REQUEST_BOUND: Duration = Duration::from_secs(2);

/// Longer than a failover after a kill takes here (the master is called
/// down after 1 s, then the sentinels elect and promote).
const TTL: Duration = Duration::from_secs(8);

const HELD: usize = 20;

/// Replicas in the test's set: a lock survives a promotion when the
/// promoted replica has it, so the Locker asks every one to confirm
/// (with one of two, a failover that promotes the other one loses it, as
/// docs/guarantees.md says).
const REPLICAS: usize = 2;

async fn locker(set: &SentinelSet) -> Locker {
    Locker::builder()
        .ttl(TTL)
        .replicas(REPLICAS, Duration::from_secs(2))
        .redis(&set.url())
        .await
        .expect("connect through the sentinels")
}

/// `HELD` locks, each acknowledged by every replica.
async fn hold(locker: &Locker) -> Vec<LockGuard> {
    let mut held = Vec::new();
    for i in 0..HELD {
        held.push(locker.lock(format!("order:{i}")).await.unwrap());
    }
    held
}

/// After the failover: every lock still held a full ttl later (so it was
/// renewed on the new master), and none can be taken by another Locker.
async fn still_held(set: &SentinelSet, held: &[LockGuard]) {
    tokio::time::sleep(TTL + SLACK).await;
    for guard in held {
        assert!(guard.is_held(), "{} was lost in the failover", guard.key());
    }
    let other = Locker::builder()
        .redis(&set.url())
        .await
        .expect("a second Locker");
    for guard in held {
        let taken = other.try_lock(guard.key()).await.unwrap();
        assert!(taken.is_none(), "{} had a second owner", guard.key());
    }
}

/// A graceful failover (`SENTINEL FAILOVER`): the former master goes on
/// taking writes for seconds, yet the Lockers move to the new master at
/// once. A new acquire lands there within one request bound of the
/// sentinels naming it (one that asks for a replica's acknowledgement
/// waits for a replica to follow the new master); a waiter is woken there
/// by a release and gets a higher token; the held locks stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_keeps_acknowledged_locks_and_wakes_waiters_on_the_new_master() {
    let set = SentinelSet::start(2, 3);
    set.settled().await;
    let locker = locker(&set).await;
    let mut held = hold(&locker).await;
    let before = held[0].token();
    let waiter = Locker::builder().redis(&set.url()).await.unwrap();
    let unconfirmed = waiter.clone();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("order:0").wait(Duration::from_secs(60)).await;
        (guard, Instant::now())
    });
    let old = set.master_port().await;
    let new = set.failover().await;
    assert_ne!(new, old);
    // The Lockers hear of the switch from the sentinels a moment after
    // they name the new master: acquires land there within one request
    // bound.
    let started = Instant::now();
    let mut new_master = set.server(new).connection().await;
    loop {
        let fresh = unconfirmed.lock("after-failover").await.unwrap();
        let landed: bool = new_master
            .exists("lock:{after-failover}:lease")
            .await
            .unwrap();
        fresh.release().await.unwrap();
        if landed {
            break;
        }
        assert!(
            started.elapsed() < REQUEST_BOUND + SLACK,
            "acquires still went to the former master after {:?}",
            started.elapsed()
        );
    }
    // The release goes to the new master, and the waiter hears of it there
    // (not at the end of the holder's lease, a ttl away).
    let released = Instant::now();
    held.remove(0).release().await.unwrap();
    let (guard, woken) = waiting.await.unwrap();
    let guard = guard.expect("the waiter gets the lock after the failover");
    assert!(
        woken - released < TTL / 2,
        "the waiter was not woken: it took {:?}",
        woken - released
    );
    assert!(
        guard.token() > before,
        "the token went back in the failover"
    );
    guard.release().await.unwrap();
    still_held(&set, &held).await;
    for guard in held {
        guard.release().await.unwrap();
    }
}

/// The master killed (SIGKILL): once the sentinels promote a replica, a
/// Locker made before the kill acquires within one request bound, the
/// acknowledged locks are still held there, and tokens keep rising.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_is_replaced_without_losing_acknowledged_locks() {
    let mut set = SentinelSet::start(2, 3);
    set.settled().await;
    let locker = locker(&set).await;
    let urls = set.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let unconfirmed = Locker::builder()
        .redis_sentinel(MASTER_NAME, &urls)
        .await
        .unwrap();
    let held = hold(&locker).await;
    let before = held[0].token();
    let old = set.master_port().await;
    set.server_mut(old).kill();
    let killed = Instant::now();
    set.new_master(old).await;
    let failover = killed.elapsed();
    let fresh = unconfirmed
        .lock("after-kill")
        .wait(Duration::from_secs(30))
        .await
        .expect("an acquire on the new master");
    let took = killed.elapsed();
    assert!(
        took < failover + REQUEST_BOUND + SLACK,
        "the first acquire came {took:?} after the kill; the failover took {failover:?}"
    );
    fresh.release().await.unwrap();
    still_held(&set, &held).await;
    let key = held[0].key().to_owned();
    for guard in held {
        guard.release().await.unwrap();
    }
    // One replica is left, which cannot confirm to two: a Locker that asks
    // for none takes the key.
    let after = unconfirmed.lock(&key).await.unwrap();
    assert!(
        after.token() > before,
        "the token went back in the failover"
    );
    after.release().await.unwrap();
}

/// A master name the sentinels do not know is an error when connecting,
/// within the timeout, naming what was asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_master_name_is_unavailable_at_connect() {
    let set = SentinelSet::start(0, 1);
    let urls = set.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let started = Instant::now();
    let err = Locker::builder()
        .timeout(Duration::from_millis(500))
        .redis_sentinel("no-such-master", &urls)
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err:?}");
    let chain = error_chain(&err);
    assert!(chain.contains("names a master `no-such-master`"), "{chain}");
    assert!(started.elapsed() < Duration::from_millis(500) + SLACK);
}

/// A failover the Locker did not hear of (its sentinels were out of reach
/// while it happened, so no `+switch-master` came), of a master that froze
/// instead of going away: requests to it get no answer at all. One given
/// up on has the sentinels asked, who name the new master, and the next
/// acquire lands there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswering_master_is_checked_with_the_sentinels() {
    // A request to the frozen master runs out of its bound (the acquire
    // fails, its outcome unknown); one of the next goes to the new master,
    // a few request bounds later.
    unheard_failover(Demise::Frozen).await;
}

/// How the former master of an unheard failover ends.
enum Demise {
    /// Paused (SIGSTOP) until the Locker has moved on: requests to it get
    /// no answer.
    Frozen,
    /// Killed: requests to it find a broken connection.
    Killed,
    /// Made a replica of the new master: requests to it are answered
    /// `READONLY`.
    Demoted,
}

/// A failover the Locker did not hear of, of a master that was killed:
/// the first request that finds its connection broken forgets it, and the
/// next acquire lands on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unheard_failover_is_found_by_a_broken_connection() {
    unheard_failover(Demise::Killed).await;
}

/// A failover the Locker did not hear of, of a master that is now a
/// replica: the first request answered `READONLY` forgets it, and the next
/// acquire lands on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unheard_failover_is_found_by_readonly() {
    unheard_failover(Demise::Demoted).await;
}

/// The sentinels are out of the Locker's reach while the master fails over
/// (so no `+switch-master` comes), and the former master ends as `demise`
/// says: within a few request bounds of the sentinels coming back, an
/// acquire lands on the new master.
async fn unheard_failover(demise: Demise) {
    let mut set = SentinelSet::start(1, 3);
    set.settled().await;
    let bound = Duration::from_millis(500);
    let (locker, proxies) = through_proxies(&set, bound).await;
    locker
        .lock("before")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    for proxy in &proxies {
        proxy.cut();
    }
    let old = set.master_port().await;
    let new = match demise {
        Demise::Frozen => {
            set.server(old).pause();
            set.new_master(old).await
        }
        Demise::Killed => {
            set.server_mut(old).kill();
            set.new_master(old).await
        }
        Demise::Demoted => {
            let new = set.failover().await;
            // The sentinels demote the former master seconds later: do it now.
            let mut conn = set.server(old).connection().await;
            let _: () = redis::cmd("REPLICAOF")
                .arg("127.0.0.1")
                .arg(new)
                .query_async(&mut conn)
                .await
                .unwrap();
            new
        }
    };
    for proxy in &proxies {
        proxy.heal();
    }
    let started = Instant::now();
    let guard = loop {
        match locker.lock("after").await {
            Ok(guard) => break guard,
            Err(err) if started.elapsed() > Duration::from_secs(10) => {
                panic!("no acquire on the new master: {}", error_chain(&err))
            }
            Err(_) => {}
        }
    };
    let took = started.elapsed();
    if let Demise::Frozen = demise {
        set.server(old).resume();
    }
    assert!(
        took < 4 * bound + SLACK,
        "the new master was used after {took:?}"
    );
    let lease = locker.stored_keys("after").unwrap().lease().to_owned();
    let mut conn = set.server(new).connection().await;
    let there: bool = conn.exists(&lease).await.unwrap();
    assert!(there, "the lease is not on the new master");
    guard.release().await.unwrap();
}

/// A Locker with request bound `bound` that reaches every sentinel of
/// `set` through a proxy of its own (which a test cuts and heals), and the
/// proxies.
async fn through_proxies(set: &SentinelSet, bound: Duration) -> (Locker, Vec<DelayProxy>) {
    let mut proxies = Vec::new();
    for url in set.sentinel_urls() {
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        proxies.push(DelayProxy::start(port).await);
    }
    let hosts: Vec<String> = proxies
        .iter()
        .map(|proxy| format!("127.0.0.1:{}", proxy.port()))
        .collect();
    let url = format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","));
    let locker = Locker::builder().timeout(bound).redis(&url).await.unwrap();
    (locker, proxies)
}
