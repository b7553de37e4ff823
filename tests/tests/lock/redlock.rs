//! RedLock over independent masters (`LockerBuilder::redlock`): a majority
//! keeps the lock going and a minority cannot, tokens rise whatever the
//! masters' clocks say, and the kinds it cannot keep are refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lock_core::backend::{Attempt, LockStore, RedLockBackend, RedisBackend, StoredKeys};
use lock_core::{LockError, LockKind, Locker, LockerBuilder};
use lock_testkit::{Counting, DelayProxy, RedisServer, TestStore, error_chain};
use redis::AsyncCommands;
use tokio::time::Instant;

use crate::conformance::SLACK;

const TTL: Duration = Duration::from_secs(3);

fn start(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

async fn redlock(masters: &[RedisServer], builder: LockerBuilder) -> Locker {
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    builder
        .ttl(TTL)
        .redlock(&urls)
        .await
        .expect("connect to the masters")
}

/// Makes `master` mint the tokens of `key` from `ahead` past its clock on,
/// as if its clock ran that far ahead (its token record, as acquire.lua
/// keeps one).
async fn clock_ahead(master: &RedisServer, key: &str, ahead: Duration) {
    let token = server_micros(master).await + ahead.as_micros() as u64;
    let record = format!("1|{token}");
    let mut conn = master.connection().await;
    let _: () = conn
        .set_ex(
            format!("lock:{{{key}}}:fence"),
            record,
            ahead.as_secs() + 60,
        )
        .await
        .unwrap();
}

/// 5 masters: with 2 killed, locks are taken, renewed and released, and
/// tokens rise; with a third killed, an acquire fails with `Unavailable`
/// within the Locker's timeout and a holder is told its lease is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_of_five_masters_is_enough_and_a_minority_is_not() {
    let mut masters = start(5);
    let timeout = Duration::from_millis(800);
    let locker = redlock(&masters, Locker::builder().timeout(timeout)).await;
    let other = redlock(&masters, Locker::builder().timeout(timeout)).await;
    masters[3].kill();
    masters[4].kill();
    let held = locker.lock("k").await.unwrap();
    assert!(other.try_lock("k").await.unwrap().is_none(), "two owners");
    // Past the ttl: only renewals on the three live masters kept it.
    tokio::time::sleep(TTL + SLACK).await;
    assert!(held.is_held(), "renewals on a quorum did not keep it");
    let first = held.token();
    held.release().await.unwrap();
    let next = other.lock("k").await.unwrap();
    assert!(next.token() > first);
    let lost = next.lost();
    masters[2].kill();
    let started = Instant::now();
    let err = locker
        .lock("k2")
        .wait(Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    let bound = timeout + TTL / 10 + SLACK;
    assert!(
        started.elapsed() < bound,
        "failed after {:?}",
        started.elapsed()
    );
    let told = tokio::time::timeout(TTL + SLACK, lost).await;
    assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
}

/// The two-phase grant: a quorum that includes a master whose clock runs
/// far ahead gets that master's (high) token, raised on the whole quorum;
/// a later quorum without that master still mints above it, also when the
/// first lease ran out unreleased. (With the quorum's highest token alone,
/// the later one would go back by the master's lead.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_quorums_when_a_master_clock_runs_ahead() {
    let mut masters = start(5);
    let locker = redlock(&masters, Locker::builder()).await;
    let lead = Duration::from_secs(1000);
    clock_ahead(&masters[0], "k", lead).await;
    // Quorum {0, 1, 2}: 3 and 4 frozen.
    masters[3].pause();
    masters[4].pause();
    let ttl = Duration::from_millis(600);
    let first = locker.lock("k").ttl(ttl).watchdog(false).await.unwrap();
    let ahead = first.token();
    let now = server_micros(&masters[1]).await;
    assert!(
        ahead.get() > now + 900_000_000,
        "the token {ahead} did not come from the master ahead"
    );
    // Not released: only what the raise left on 1 and 2 can keep the line.
    std::mem::forget(first);
    masters[3].resume();
    masters[4].resume();
    tokio::time::sleep(ttl + SLACK).await;
    // Quorum {1, 2, 3, 4}: the master that ran ahead is gone.
    masters[0].kill();
    let next = locker.lock("k").await.unwrap();
    assert!(
        next.token() > ahead,
        "token {} after {ahead}: a quorum without the fast master went back",
        next.token()
    );
    next.release().await.unwrap();
}

/// A server's clock in microseconds (Redis `TIME`).
async fn server_micros(master: &RedisServer) -> u64 {
    let mut conn = master.connection().await;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    secs * 1_000_000 + micros
}

/// A history under contention while masters freeze and thaw (never more
/// than two of five at once) and two masters mint far ahead of the others:
/// no two holders at once, and tokens strictly increase in the order the
/// lock was held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_has_one_holder_at_a_time_and_rising_tokens_across_clock_offsets() {
    let masters = Arc::new(start(5));
    clock_ahead(&masters[0], "h", Duration::from_secs(1000)).await;
    clock_ahead(&masters[1], "h", Duration::from_secs(500)).await;
    let mut lockers = Vec::new();
    for _ in 0..3 {
        lockers.push(redlock(&masters, Locker::builder()).await);
    }
    let inside = Arc::new(AtomicBool::new(false));
    let tokens = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    // Freezes each master in turn, two at a time.
    let freezer = {
        let (masters, stop) = (Arc::clone(&masters), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let frozen = [round % 5, (round + 2) % 5];
                for &i in &frozen {
                    masters[i].pause();
                }
                tokio::time::sleep(Duration::from_millis(400)).await;
                for &i in &frozen {
                    masters[i].resume();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                round += 1;
            }
        })
    };
    let mut tasks = Vec::new();
    for (i, locker) in lockers.iter().cycle().take(6).enumerate() {
        let (locker, inside, tokens) = (locker.clone(), Arc::clone(&inside), Arc::clone(&tokens));
        tasks.push(tokio::spawn(async move {
            for _ in 0..8 {
                let guard = locker
                    .lock("h")
                    .wait(Duration::from_secs(60))
                    .await
                    .unwrap_or_else(|err| panic!("task {i}: {err}"));
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokens.lock().unwrap().push(guard.token().get());
                tokio::time::sleep(Duration::from_millis(20)).await;
                inside.store(false, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    freezer.await.unwrap();
    let tokens = tokens.lock().unwrap().clone();
    assert_eq!(tokens.len(), 48);
    for pair in tokens.windows(2) {
        assert!(
            pair[1] > pair[0],
            "tokens went back: {pair:?} in {tokens:?}"
        );
    }
}

/// A master restarted without persistence forgets the leases it held; a
/// holder on all three masters still has a majority, so nobody else gets
/// the lock meanwhile. (A holder on a bare majority would not: the
/// store guide's rule (docs/stores.md) is to keep a restarted master out for one ttl.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_restarted_master_does_not_let_a_second_owner_in() {
    let mut masters = start(3);
    let locker = redlock(&masters, Locker::builder()).await;
    let other = redlock(&masters, Locker::builder()).await;
    let held = locker.lock("k").await.unwrap();
    masters[0].restart();
    assert!(other.try_lock("k").await.unwrap().is_none(), "two owners");
    assert!(held.is_held());
    let first = held.token();
    held.release().await.unwrap();
    let next = other.lock("k").await.unwrap();
    assert!(next.token() > first);
    next.release().await.unwrap();
}

/// The kinds RedLock does not keep are refused at once, naming the store;
/// the multi-lock (over plain locks) works; fewer than 3 masters is a
/// configuration error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_refuses_what_it_cannot_keep() {
    let masters = start(3);
    let locker = redlock(&masters, Locker::builder()).await;
    let refused = [
        locker.fair_lock("k").await.map(drop),
        locker.read_lock("k").await.map(drop),
        locker.write_lock("k").await.map(drop),
        locker.semaphore("k", 2).await.map(drop),
        locker.striped("k", 2).await.map(drop),
    ];
    for outcome in refused {
        let err = outcome.unwrap_err();
        assert!(matches!(err, LockError::Unsupported { .. }), "{err}");
        assert!(err.to_string().contains("redlock"), "{err}");
    }
    let all = locker.lock_all(["a", "b"]).await.unwrap();
    all.release().await.unwrap();
    let two: Vec<String> = masters[..2].iter().map(RedisServer::url).collect();
    let two: Vec<&str> = two.iter().map(String::as_str).collect();
    let err = Locker::builder().redlock(&two).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err:?}");
    let chain = error_chain(&err);
    assert!(chain.contains("at least 3 independent masters"), "{chain}");
}

/// A waiter hears a release on whichever masters the holder held: here not
/// on the first master (frozen when the lock was taken), so a waiter
/// listening there alone would sleep out the holder's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_hears_a_release_on_any_master() {
    let store = TestStore::RedLock(start(3));
    let ttl = Duration::from_secs(10);
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let first = store.servers()[0];
    first.pause();
    let held = holder.lock("k").ttl(ttl).await.unwrap();
    first.resume();
    let asked = counts.acquires();
    let waiting = tokio::spawn(async move {
        let guard = waiter.lock("k").wait(Duration::from_secs(30)).await;
        (guard, Instant::now())
    });
    // Asked twice: once before subscribing, once after.
    counts.acquires_reach(asked + 2).await;
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard, woken) = waiting.await.unwrap();
    guard.unwrap().release().await.unwrap();
    assert!(
        woken - released < Duration::from_secs(2),
        "woken {:?} after the release",
        woken - released
    );
}

/// A master cut off (its connections closed, new ones refused) when a lock
/// is released keeps its lease only until it is reachable again: the
/// release is sent again in the background, not left to the ttl, so the
/// master's vote is free again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_a_master_missed_is_sent_again_once_it_is_back() {
    let masters = start(3);
    let cut_off = DelayProxy::start(masters[0].port()).await;
    let urls = [cut_off.url(), masters[1].url(), masters[2].url()];
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let ttl = Duration::from_secs(30);
    let locker = Locker::builder()
        .ttl(ttl)
        .redlock(&urls)
        .await
        .expect("connect to the masters");
    let held = locker.lock("k").await.unwrap();
    let lease = locker.stored_keys("k").unwrap().lease().to_owned();
    let mut first = masters[0].connection().await;
    let there: bool = first.exists(&lease).await.unwrap();
    assert!(there, "the first master never had the lease");
    cut_off.cut();
    held.release().await.unwrap();
    let there: bool = first.exists(&lease).await.unwrap();
    assert!(there, "the cut-off master was released after all");
    cut_off.heal();
    let healed = Instant::now();
    loop {
        let there: bool = first.exists(&lease).await.unwrap();
        if !there {
            break;
        }
        assert!(
            healed.elapsed() < ttl / 3,
            "the lease stayed on the master that missed the release"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A force-release that reaches two masters late takes nothing a waiter was
/// granted meanwhile. The holder has masters 0 and 1 (a majority), not 2;
/// the force-release's removal waits in proxies on the way to 1 and 2 (its
/// reads pass). Its removal on master 0 wakes the waiter, granted on 0 and
/// 2. A removal of whatever each master held then took the waiter's lease
/// on 2 away when it landed, and another Locker got a majority beside the
/// waiter; a removal by the holder's owner value leaves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_release_that_lands_late_keeps_what_a_waiter_was_granted() {
    let masters = start(3);
    let keys = StoredKeys::new("lock", "forced").unwrap();
    for master in &masters[..2] {
        let url = master.url();
        let backend = RedisBackend::connect(&url, Duration::from_secs(2)).await;
        let backend = backend.unwrap();
        let lease = Duration::from_secs(60);
        let taken = backend.acquire(&keys, LockKind::Exclusive, "holder-owner", lease);
        assert!(matches!(taken.await, Ok(Attempt::Acquired(_))));
    }
    let late = [
        DelayProxy::start(masters[1].port()).await,
        DelayProxy::start(masters[2].port()).await,
    ];
    let urls = [masters[0].url(), late[0].url(), late[1].url()];
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let operator = Locker::builder()
        .timeout(Duration::from_secs(10))
        .redlock(&urls);
    let operator = operator.await.unwrap();
    // Its reads' script loaded everywhere: a force-release's first request
    // naming the key on each master is its read.
    assert_eq!(operator.inspect("forced").await.unwrap().holders.len(), 1);
    let direct: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let direct: Vec<&str> = direct.iter().map(String::as_str).collect();
    let backend = RedLockBackend::connect(&direct, Duration::from_secs(2))
        .await
        .unwrap();
    let counts = Counting::new(Arc::new(backend));
    let waiter = Locker::builder().ttl(TTL).backend(counts.clone()).unwrap();
    let other = redlock(&masters, Locker::builder()).await;
    let waiting =
        tokio::spawn(async move { waiter.lock("forced").wait(Duration::from_secs(20)).await });
    // Refused twice (before and after subscribing): it waits.
    counts.acquires_reach(2).await;

    for proxy in &late {
        proxy.hold_from(keys.lease(), 1);
    }
    let forcing = tokio::spawn(async move { operator.force_release("forced").await });
    for proxy in &late {
        proxy.requests_hold(keys.lease()).await;
    }
    // Master 0 ended the holder's lease and woke the waiter.
    let granted = tokio::time::timeout(Duration::from_secs(10), waiting).await;
    let granted = granted.expect("the waiter was not woken").unwrap();
    let granted = granted.expect("the waiter is granted");
    for proxy in &late {
        proxy.release();
    }
    let forced = forcing.await.unwrap().expect("the force-release");
    assert_eq!(forced.removed, 1, "{forced:?}");
    assert!(Some(granted.token()) > forced.tokens_up_to, "{forced:?}");
    let beside = other.try_lock("forced").await.unwrap();
    assert!(
        beside.is_none(),
        "another Locker got a majority beside the waiter: {beside:?}"
    );
    granted.release().await.expect("the waiter kept its grant");
}
