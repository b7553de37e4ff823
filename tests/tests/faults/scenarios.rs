//! The scenarios; each states its expected outcome.

use std::time::Duration;

use lock_core::fence::RedisFence;
use lock_core::{LockError, Locker};
use lock_testkit::history::now_ms;
use lock_testkit::{
    ClockShift, DelayProxy, RedisServer, all_keys, command_calls, lasting_keys, release_channel,
    token_record,
};
use proptest::prelude::*;
use tokio::time::Instant;

use crate::harness::{
    Clients, SLACK, Workers, assert_history, facts, one_at_a_time, store_histories, worker,
};

/// Runs blocking client orchestration off the async runtime.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// 1. Baseline: 8 processes x 1000 operations on 3 keys, no faults:
/// nothing is rejected, every token is unique, the store is ordered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s01_baseline_nothing_rejected() {
    let _one_at_a_time = one_at_a_time().await;
    let (lock, data) = (RedisServer::start(), RedisServer::start());
    let ttl = Duration::from_secs(5);
    let mut clients = Clients::new();
    clients.spawn_workers(
        &lock.url(),
        &data,
        Workers {
            count: 8,
            keys: 3,
            ops: 1000,
            ttl,
            work: Duration::ZERO,
        },
    );
    let (events, pauses) = blocking(move || clients.finish()).await;
    let summary = assert_history(
        &events,
        &facts(ttl, pauses, store_histories(&data, 3).await),
    );
    assert_eq!(summary.acquired, 8000);
    assert_eq!(summary.accepted, 16_000);
    assert_eq!((summary.rejected, summary.lost), (0, 0));
}

/// 2. A holder frozen (SIGSTOP) for 2 x ttl inside its critical section:
/// another acquires and writes; the thawed holder's writes are rejected and
/// it is told it lost the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s02_frozen_holder_is_fenced_and_told() {
    let _one_at_a_time = one_at_a_time().await;
    let (lock, data) = (RedisServer::start(), RedisServer::start());
    let ttl = Duration::from_millis(400);
    let mut clients = Clients::new();
    clients.spawn_workers(
        &lock.url(),
        &data,
        Workers {
            count: 3,
            keys: 1,
            ops: 20,
            ttl,
            work: Duration::from_millis(100),
        },
    );
    let (events, pauses, frozen) = blocking(move || {
        let mut frozen = Vec::new();
        for _ in 0..2 {
            // A fresh acquisition: seen within 40 ms, the holder is still
            // inside its 100 ms of work when frozen.
            let held = clients.wait_for(|e| e.kind == "acquire_ok" && e.at + 40 >= now_ms());
            clients.freeze(&held.client, 2 * ttl);
            frozen.push(held);
        }
        let (events, pauses) = clients.finish();
        (events, pauses, frozen)
    })
    .await;
    for held in &frozen {
        let told = events
            .iter()
            .any(|e| e.kind == "lost" && e.client == held.client && e.token == held.token);
        assert!(
            told,
            "{} was frozen past its lease but not told",
            held.client
        );
    }
    let summary = assert_history(
        &events,
        &facts(ttl, pauses, store_histories(&data, 1).await),
    );
    assert!(summary.rejected >= 2, "{summary:?}");
    for rejected in events.iter().filter(|e| e.kind == "write_rejected") {
        let told = events
            .iter()
            .any(|e| e.kind == "lost" && e.client == rejected.client && e.token == rejected.token);
        assert!(
            told,
            "{} was rejected with {} but not told",
            rejected.client, rejected.token
        );
    }
}

/// 3. A holder frozen while its acquire reply is in flight (the server
/// answered, the client could not read it) past the lease: it does not
/// believe it holds the expired lease; it takes a fresh one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s03_reply_in_flight_past_the_lease() {
    let _one_at_a_time = one_at_a_time().await;
    let (lock, data) = (RedisServer::start(), RedisServer::start());
    let ttl = Duration::from_millis(500);
    let mut clients = Clients::new();
    clients.spawn(
        &worker(&lock.url(), &data, "c0", 1, 2, ttl, Duration::ZERO),
        &[("FAULT_STEP", "1"), ("FAULT_TIMEOUT_MS", "10000")],
    );
    let (lock_pid, lock_port) = (lock.pid().unwrap(), lock.port());
    let (clients, frozen_at) = blocking(move || {
        // A first operation loads the scripts (EVALSHA would otherwise
        // need a second round trip after NOSCRIPT).
        clients.wait_for(|e| e.kind == "ready");
        clients.step("c0");
        clients.wait_for(|e| e.kind == "release_ok");
        assert!(lock_testkit::send_signal(lock_pid, libc::SIGSTOP));
        clients.step("c0");
        clients.wait_for(|e| e.kind == "acquire_sent");
        // The request has reached the frozen server's socket.
        let reached = std::time::Instant::now() + Duration::from_secs(10);
        while lock_testkit::unread_bytes(lock_port) == 0 {
            assert!(
                std::time::Instant::now() < reached,
                "the acquire never reached the server"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let frozen_at = clients.stop("c0");
        assert!(lock_testkit::send_signal(lock_pid, libc::SIGCONT));
        (clients, frozen_at)
    })
    .await;
    // The server has answered and minted a token; its lease now runs out.
    let mut conn = lock.connection().await;
    let keys = Locker::memory().stored_keys("fault:0").unwrap();
    // The lease value is `1|<owner>|<token>` (then `|w` once someone waits); read
    // it before the lease ends.
    let mut first: Option<u64> = None;
    for _ in 0..500 {
        let lease: Option<String> = redis::cmd("GET")
            .arg(keys.lease())
            .query_async(&mut conn)
            .await
            .unwrap();
        first = lease.and_then(|value| value.split('|').nth(2)?.parse().ok());
        if first.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let Some(first) = first else {
        panic!(
            "the frozen client's acquire never reached the server: {:?}",
            all_keys(&mut conn).await
        );
    };
    tokio::time::sleep(2 * ttl).await;
    let (events, pauses) = blocking(move || {
        let mut clients = clients;
        clients.cont("c0", frozen_at);
        clients.finish()
    })
    .await;
    let ok = events
        .iter()
        .rfind(|e| e.kind == "acquire_ok")
        .expect("acquired after thawing");
    assert!(ok.at >= frozen_at, "the second operation did not acquire");
    assert!(
        ok.token > first,
        "took the expired lease {first} for its own"
    );
    let summary = assert_history(
        &events,
        &facts(ttl, pauses, store_histories(&data, 1).await),
    );
    assert_eq!(
        summary.accepted, 4,
        "its writes with the fresh lease went through"
    );
}

/// 4. The watchdog starved (the holder's only runtime thread blocked for
/// 3 x ttl): the loss is told, no renewal happens after the deadline, the
/// lease is never revived by a renewal, and the holder's writes are
/// rejected once another holder has written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s04_starved_watchdog() {
    let _one_at_a_time = one_at_a_time().await;
    let (lock, data) = (RedisServer::start(), RedisServer::start());
    let ttl = Duration::from_millis(300);
    let mut clients = Clients::new();
    let starve = vec![
        "starve".into(),
        lock.url(),
        data.url(),
        "s".into(),
        ttl.as_millis().to_string(),
        (3 * ttl).as_millis().to_string(),
    ];
    clients.spawn(&starve, &[]);
    let other = worker(&lock.url(), &data, "w", 1, 3, ttl, Duration::ZERO);
    let (events, pauses) = blocking(move || {
        clients.wait_for(|e| e.kind == "blocking");
        clients.spawn(&other, &[]);
        clients.finish()
    })
    .await;
    assert!(
        !events.iter().any(|e| e.kind == "still_held"),
        "believed held after the block"
    );
    let lost = events
        .iter()
        .find(|e| e.client == "s" && e.kind == "lost")
        .expect("loss told");
    let blocked = events.iter().find(|e| e.kind == "blocking").unwrap();
    // That no renewal is *sent* after the deadline is checked where sent
    // renewals can be counted: conformance's
    // a_starved_watchdog_sends_no_renewal_after_the_deadline (this history
    // logs confirmed renewals only).
    assert!(lost.at >= blocked.at);
    let writes: Vec<_> = events
        .iter()
        .filter(|e| e.client == "s" && e.kind.starts_with("write"))
        .collect();
    assert!(
        writes.iter().all(|e| e.kind == "write_rejected"),
        "{writes:?}"
    );
    // The block counts as a pause for the checker's timing.
    let mut facts = facts(ttl, pauses, store_histories(&data, 1).await);
    let unblocked = events.iter().find(|e| e.kind == "unblocked").unwrap();
    facts
        .pauses
        .insert("s".into(), vec![(blocked.at, unblocked.at)]);
    assert_history(&events, &facts);
}

/// 5. Redis frozen (SIGSTOP) and asleep (`DEBUG SLEEP`): for half a ttl the
/// holder keeps its lease (it trusts its own deadline); for two ttls the
/// loss is told and the next holder's token is higher.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s05_redis_paused_short_and_long() {
    let _one_at_a_time = one_at_a_time().await;
    let lock = RedisServer::options().debug_commands().start();
    let ttl = Duration::from_millis(900);
    let locker = Locker::builder()
        .ttl(ttl)
        .timeout(Duration::from_millis(250))
        .redis(&lock.url())
        .await
        .unwrap();
    let mut admin = lock.connection().await;

    // Waits for the next confirmed renewal (the deadline moves up again).
    let renewed = |guard: &lock_core::LockGuard| {
        let lease = guard.lease();
        async move {
            while lease.expires_in() < ttl * 3 / 4 {
                assert!(lease.is_held(), "lost while waiting for a renewal");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };

    // Short: SIGSTOP for ttl / 2.
    let guard = locker.lock("paused").await.unwrap();
    lock.pause();
    tokio::time::sleep(ttl / 2).await;
    lock.resume();
    assert!(guard.is_held(), "a short pause cost the lease");
    renewed(&guard).await;
    // Short: DEBUG SLEEP for ttl / 2.
    let _: () = redis::cmd("DEBUG")
        .arg("SLEEP")
        .arg(0.45)
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(guard.is_held(), "a short DEBUG SLEEP cost the lease");
    renewed(&guard).await;

    // Long: SIGSTOP for 2 x ttl.
    let started = Instant::now();
    lock.pause();
    let lost = tokio::time::timeout(ttl + ttl / 3 + SLACK, guard.lost()).await;
    lock.resume();
    assert!(lost.is_ok(), "loss not told within its deadline");
    tokio::time::sleep((2 * ttl).saturating_sub(started.elapsed())).await;
    let next = locker.lock("paused").wait(2 * ttl).await.unwrap();
    assert!(next.token() > guard.token());
    drop(guard);

    // Long: DEBUG SLEEP for 2 x ttl, from another connection.
    let sleeper = tokio::spawn(async move {
        let _: () = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(1.8)
            .query_async(&mut admin)
            .await
            .unwrap();
    });
    let lost = tokio::time::timeout(ttl + ttl / 3 + SLACK, next.lost()).await;
    assert!(lost.is_ok(), "loss not told during DEBUG SLEEP");
    sleeper.await.unwrap();
    let third = locker.lock("paused").wait(2 * ttl).await.unwrap();
    assert!(third.token() > next.token());
}

/// 7. Stale renewal and release: a holder's traffic is delayed by the
/// network (a holding proxy) past its lease; another owner takes the lock;
/// the delayed renewals and release arrive late and leave the new owner's
/// lock untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s07_delayed_renewal_and_release_touch_nothing() {
    let _one_at_a_time = one_at_a_time().await;
    let lock = RedisServer::start();
    let proxy = DelayProxy::start(lock.port()).await;
    let ttl = Duration::from_millis(400);
    let slow = Locker::builder()
        .ttl(ttl)
        .timeout(Duration::from_secs(5))
        .redis(&proxy.url())
        .await
        .unwrap();
    // Every script loaded: the held-back renewals and release then run as
    // sent when they are delivered (not as NOSCRIPT answers).
    slow.lock("warm").await.unwrap().release().await.unwrap();
    let direct = Locker::redis(&lock.url()).await.unwrap();
    let old = slow.lock("delayed").await.unwrap();
    proxy.hold();
    // The holder's renewals sit in the proxy; its lease runs out.
    let _ = tokio::time::timeout(ttl + SLACK, old.lost())
        .await
        .expect("loss told");
    let new = direct.lock("delayed").wait(2 * ttl).await.unwrap();
    let release = tokio::spawn(old.release());
    tokio::time::sleep(Duration::from_millis(50)).await;
    proxy.release();
    let released = release.await.unwrap();
    assert!(
        matches!(released, Err(LockError::Lost { .. })),
        "{released:?}"
    );
    // The renewals and the release, delivered late (before the release was
    // answered: one connection, in order), changed nothing: the new owner's
    // 30 s lease was neither removed nor cut to the old one's 400 ms.
    let mut conn = lock.connection().await;
    let keys = direct.stored_keys("delayed").unwrap();
    let pttl: i64 = redis::cmd("PTTL")
        .arg(keys.lease())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        pttl > 10_000,
        "the new owner's lease was touched: pttl {pttl} ms"
    );
    assert!(new.is_held());
    assert!(slow.try_lock("delayed").await.unwrap().is_none());
    new.release().await.unwrap();
}

/// 8. Restart without persistence under load: holders are told, tokens
/// never go backwards, the history stays ordered, and a client acquires
/// soon after the server is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s08_restart_under_load() {
    let _one_at_a_time = one_at_a_time().await;
    let (mut lock, data) = (RedisServer::start(), RedisServer::start());
    let ttl = Duration::from_millis(500);
    let mut clients = Clients::new();
    clients.spawn_workers(
        &lock.url(),
        &data,
        Workers {
            count: 3,
            keys: 2,
            ops: 60,
            ttl,
            work: Duration::from_millis(10),
        },
    );
    // A holder across the restart (the workers' 10 ms critical sections
    // mostly end in the downtime): it must be told.
    let holder = Locker::builder().ttl(ttl).redis(&lock.url()).await.unwrap();
    let held = holder.lock("fault:held").await.unwrap();
    let (clients, healed) = blocking(move || {
        for _ in 0..20 {
            clients.wait_for(|e| e.kind == "acquire_ok");
        }
        lock.restart();
        let healed = now_ms();
        (clients, (lock, healed))
    })
    .await;
    let lost = tokio::time::timeout(ttl + SLACK, held.lost())
        .await
        .expect("the holder across the restart was not told");
    assert!(matches!(lost, LockError::Lost { .. }), "{lost}");
    let (events, pauses) = blocking(move || clients.finish()).await;
    let (_lock, healed) = healed;
    let facts = facts(ttl, pauses, store_histories(&data, 2).await);
    assert_history(&events, &facts);
    let first = lock_testkit::history::first_acquire_after(&events, healed)
        .expect("acquired after the restart");
    assert!(
        first - healed <= (ttl + SLACK).as_millis() as u64 + 2000,
        "{} ms",
        first - healed
    );
    // Tokens of one key never go backwards in time (2 ms apart or more).
    for key in ["fault:0", "fault:1"] {
        let mut oks: Vec<_> = events
            .iter()
            .filter(|e| e.kind == "acquire_ok" && e.key == key)
            .collect();
        oks.sort_by_key(|e| e.at);
        for a in &oks {
            for b in oks.iter().filter(|b| b.at >= a.at + 2) {
                assert!(
                    b.token > a.token,
                    "{key}: token {} after {}",
                    b.token,
                    a.token
                );
            }
        }
    }
}

/// 9. Failover that loses the lock: the replica is frozen, the master
/// acknowledges the lock, the master dies, the replica is promoted. With
/// replica acknowledgement on, the acquire fails instead; with it off, the
/// second holder's newer token fences off the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s09_failover_that_loses_the_lock() {
    let _one_at_a_time = one_at_a_time().await;
    let data = RedisServer::start();
    let fence = RedisFence::new(data.connection().await);

    // With acknowledgement: refused.
    let master = RedisServer::start();
    let replica = master.start_replica().await;
    replica.pause();
    let acked = Locker::builder()
        .replicas(1, Duration::from_millis(200))
        .redis(&master.url())
        .await
        .unwrap();
    let err = acked.lock("failover").await.unwrap_err();
    assert!(
        matches!(err, LockError::ReplicasNotConfirmed { .. }),
        "{err}"
    );
    replica.resume();
    drop((replica, master));

    // Without: a duplicate holder, caught by the fence.
    let mut master = RedisServer::start();
    let replica = master.start_replica().await;
    let on_master = Locker::builder()
        .ttl(Duration::from_millis(600))
        .redis(&master.url())
        .await
        .unwrap();
    replica.pause();
    let first = on_master.lock("failover").await.unwrap();
    master.kill();
    replica.resume();
    replica.promote().await;
    let on_replica = Locker::redis(&replica.url()).await.unwrap();
    let second = on_replica
        .lock("failover")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(second.token() > first.token());
    fence
        .set("failover:data", "second", second.token())
        .await
        .unwrap();
    let stale = fence.set("failover:data", "first", first.token()).await;
    assert!(
        matches!(stale, Err(LockError::StaleToken { .. })),
        "{stale:?}"
    );
    let told = tokio::time::timeout(Duration::from_millis(600) + SLACK, first.lost()).await;
    assert!(told.is_ok(), "the first holder was not told");
}

/// 10. Split brain: a replica is promoted while clients still use the old
/// master; two holders at once, and fencing keeps accepted writes ordered:
/// the loser is told by a stale-token error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s10_split_brain() {
    let _one_at_a_time = one_at_a_time().await;
    let data = RedisServer::start();
    let fence = RedisFence::new(data.connection().await);
    let master = RedisServer::start();
    let replica = master.start_replica().await;
    let ttl = Duration::from_millis(600);
    let on_master = Locker::builder()
        .ttl(ttl)
        .redis(&master.url())
        .await
        .unwrap();
    let a = on_master.lock("split").await.unwrap();
    master.wait_for_replicas(1).await;
    replica.promote().await;
    let on_replica = Locker::builder()
        .ttl(ttl)
        .redis(&replica.url())
        .await
        .unwrap();
    // The promoted copy of A's lease is not renewed there and runs out.
    let b = on_replica.lock("split").wait(3 * ttl).await.unwrap();
    assert!(
        a.is_held() && b.is_held(),
        "both believe they hold the lock"
    );
    assert!(b.token() > a.token());
    fence.set("split:data", "b", b.token()).await.unwrap();
    match fence.set("split:data", "a", a.token()).await {
        Err(LockError::StaleToken { newest, .. }) => assert_eq!(newest, b.token()),
        other => panic!("the loser was not told: {other:?}"),
    }
    fence.set("split:data", "b again", b.token()).await.unwrap();
}

/// 11. Cancel storm: acquires aborted at random points and guards dropped
/// without release; long before the ttl no key is left and no renewals run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s11_cancel_storm_leaves_nothing() {
    let _one_at_a_time = one_at_a_time().await;
    let lock = RedisServer::start();
    // Long enough that no check below can pass by plain expiry.
    let ttl = Duration::from_secs(6);
    let locker = Locker::builder().ttl(ttl).redis(&lock.url()).await.unwrap();
    let mut tasks = Vec::new();
    for i in 0..300u64 {
        let locker = locker.clone();
        let budget = Duration::from_micros((i * 7919) % 5000);
        tasks.push(tokio::spawn(async move {
            let lock = locker
                .lock(format!("storm:{}", i % 8))
                .wait(Duration::from_secs(5));
            if let Ok(Ok(guard)) = tokio::time::timeout(budget, lock).await {
                tokio::time::sleep(budget).await;
                drop(guard);
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        if i % 3 == 0 {
            task.abort();
        }
        let _ = task.await;
    }
    // Long before the ttl, every lease is gone (released, or undone by
    // owner value): server state has no event to await, so poll it.
    let mut conn = lock.connection().await;
    let emptied = async {
        while !lasting_keys(&mut conn).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(ttl / 3, emptied)
        .await
        .expect("keys left behind");
    // Releases and undos still on their way (spawned by dropped guards and
    // cancelled acquires) are answered or given up within the request
    // bound: count only after it.
    tokio::time::sleep(lock_core::DEFAULT_TIMEOUT).await;
    // Past the first renewal any lease left running would have sent.
    let before = command_calls(&mut conn, "evalsha").await;
    tokio::time::sleep(ttl / 3 + SLACK).await;
    let after = command_calls(&mut conn, "evalsha").await;
    assert_eq!(before, after, "renewals still running");
    assert_eq!(locker.local_queues(), 0);
}

fn hostile_char() -> impl Strategy<Value = char> {
    prop_oneof![
        prop::sample::select(vec![
            '{', '}', '*', '?', '[', ']', '\\', '\r', '\n', '\0', '%', ' ', ':'
        ]),
        any::<char>(),
    ]
}

fn hostile_key() -> impl Strategy<Value = String> {
    prop::collection::vec(hostile_char(), 1..80).prop_map(|chars| chars.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// 12. Hostile keys: every stored name of a lock is bounded, has one
    /// hash tag (so one slot) made of plain bytes and escapes, and two
    /// distinct inputs never share a lock.
    #[test]
    fn s12_hostile_keys(a in hostile_key(), b in hostile_key()) {
        let locker = Locker::memory();
        let ka = locker.stored_keys(&a).unwrap();
        let kb = locker.stored_keys(&b).unwrap();
        let tag = |name: &str| name.split_once('{').unwrap().1.split_once('}').unwrap().0.to_owned();
        let bound = "lock:{}:released".len() + 3 * lock_core::MAX_KEY_LEN;
        for name in [ka.lease(), &token_record(&ka), &release_channel(&ka)] {
            prop_assert!(name.len() <= bound, "{} bytes", name.len());
            prop_assert_eq!(name.matches('{').count(), 1);
            prop_assert_eq!(name.matches('}').count(), 1);
            prop_assert_eq!(tag(name), tag(ka.lease()));
            prop_assert!(tag(name).bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.:/@=+,;%".contains(&c)));
        }
        prop_assert_eq!(a == b, ka.lease() == kb.lease());
    }
}

/// 12b. Oversized and empty keys are refused with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s12_oversized_keys_are_refused() {
    let _one_at_a_time = one_at_a_time().await;
    let locker = Locker::memory();
    let huge = "{".repeat(1 << 20);
    assert!(matches!(
        locker.lock(huge).await,
        Err(LockError::InvalidKey { .. })
    ));
    assert!(matches!(
        locker.lock("").await,
        Err(LockError::InvalidKey { .. })
    ));
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}

/// 13. Flood: 10 000 waiters on one key and a slow holder: every waiter
/// gets its timeout in time, and the process keeps one command and one
/// pub/sub connection to Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s13_flood_of_waiters() {
    let _one_at_a_time = one_at_a_time().await;
    const WAITERS: usize = 10_000;
    let lock = RedisServer::start();
    let locker = Locker::redis(&lock.url()).await.unwrap();
    let holder = Locker::redis(&lock.url()).await.unwrap();
    let held = holder.lock("flood").await.unwrap();
    let wait = Duration::from_millis(1500);
    let before = rss_kib();
    let started = Instant::now();
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let locker = locker.clone();
            tokio::spawn(async move { locker.lock("flood").wait(wait).await.map(drop) })
        })
        .collect();
    let lined_up = async {
        while locker.local_waiters("flood") < WAITERS - 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(wait, lined_up)
        .await
        .expect("the waiters did not line up within their wait");
    let during = rss_kib();
    let mut admin = lock.connection().await;
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut admin)
        .await
        .unwrap();
    // Ours: 2 (commands, pub/sub); the holder's: 1; the admin's: 1.
    assert!(clients.lines().count() <= 4, "{clients}");
    for task in tasks {
        assert!(matches!(
            task.await.unwrap(),
            Err(LockError::WaitTimeout { .. })
        ));
    }
    let took = started.elapsed();
    assert!(took < wait + SLACK * 4, "timeouts came after {took:?}");
    println!(
        "{WAITERS} waiters: all timed out after {took:?}; ~{} bytes of RSS per waiter",
        during.saturating_sub(before) * 1024 / WAITERS as u64
    );
    held.release().await.unwrap();
}

/// 14. Redis unreachable (killed) and unresponsive (frozen) while a lock is
/// held: renewals fail, the loss is told within the lease, release fails
/// fast with an error, nothing hangs or panics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s14_unreachable_and_unresponsive_while_held() {
    let _one_at_a_time = one_at_a_time().await;
    let ttl = Duration::from_millis(600);
    for kill in [true, false] {
        let mut lock = RedisServer::start();
        let locker = Locker::builder()
            .ttl(ttl)
            .timeout(Duration::from_millis(200))
            .redis(&lock.url())
            .await
            .unwrap();
        let guard = locker.lock("gone").await.unwrap();
        if kill {
            lock.kill();
        } else {
            lock.pause();
        }
        let lost = tokio::time::timeout(ttl + ttl / 3 + SLACK, guard.lost()).await;
        assert!(lost.is_ok(), "loss not told (killed: {kill})");
        let started = Instant::now();
        assert!(guard.release().await.is_err());
        assert!(started.elapsed() < Duration::from_millis(200) + SLACK);
        let started = Instant::now();
        assert!(locker.lock("other").await.is_err());
        assert!(started.elapsed() < Duration::from_millis(200) + SLACK);
        if !kill {
            lock.resume();
        }
    }
}

/// 15. A Redis server restarted without persistence with its clock 10 s
/// behind: the token record went with the data, so the next token is
/// minted from the slow clock, below the last one. The fence refuses the
/// new holders' writes (safe) until the clock passes the last accepted
/// token (not live meanwhile); the figure is in docs/guarantees.md.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s15_restart_without_persistence_with_the_clock_behind() {
    let _one_at_a_time = one_at_a_time().await;
    let data = RedisServer::start();
    let fence = RedisFence::new(data.connection().await);
    let clock = ClockShift::new();
    let mut server = RedisServer::options().launcher(clock.launcher()).start();
    let locker = Locker::redis(&server.url()).await.unwrap();
    let guard = locker.lock("behind").await.unwrap();
    let before = guard.token();
    fence.set("behind:data", "before", before).await.unwrap();
    guard.release().await.unwrap();

    server.kill();
    clock.set(Duration::from_secs(10), false);
    server.restart();
    let restarted = now_ms();
    let after = locker
        .lock("behind")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        after.token() < before,
        "{} after {before}: the slow clock did not show",
        after.token()
    );
    let refused = fence.set("behind:data", "after", after.token()).await;
    assert!(
        matches!(refused, Err(LockError::StaleToken { .. })),
        "{refused:?}"
    );
    after.release().await.unwrap();
    // Live again once the clock passes the last token: each new holder
    // tries once.
    let accepted = async {
        loop {
            let guard = locker.lock("behind").await.unwrap();
            let written = fence.set("behind:data", "later", guard.token()).await;
            guard.release().await.unwrap();
            match written {
                Ok(()) => return now_ms() - restarted,
                Err(LockError::StaleToken { .. }) => {}
                Err(other) => panic!("{other}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let refused_for = tokio::time::timeout(Duration::from_secs(30), accepted)
        .await
        .expect("writes were refused for 30 s");
    println!("fenced writes refused for {refused_for} ms after the restart");
    assert!(refused_for >= 5_000, "refused for only {refused_for} ms");
}
