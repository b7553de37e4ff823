//! Behaviour that only a real Redis can show: several OS processes, server
//! restarts, replica promotion, pauses, unreachable servers, hash slots.

use std::future::IntoFuture;
use std::process::{Command, Stdio};
use std::time::Duration;

use lock_core::backend::StoredKeys;
use lock_core::{FencingToken, LockError, LockKind, Locker};
use lock_testkit::{
    ClockShift, RedisServer, all_keys, assert_lost, command_calls, lasting_keys, release_channel,
    token_record,
};

use redis::AsyncCommands;
use tokio::time::Instant;

const SLACK: Duration = Duration::from_millis(750);

async fn locker(server: &RedisServer) -> Locker {
    Locker::redis(&server.url()).await.expect("connect")
}

/// Asserts that no key of the locks is left in the server.
pub(crate) async fn no_lock_keys_left(conn: &mut redis::aio::MultiplexedConnection) {
    let left: Vec<String> = lasting_keys(conn)
        .await
        .into_iter()
        .filter(|k| k.starts_with("lock:"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Runs `contender` in `processes` OS processes with `args` after the URL,
/// and sums their `ops` and `violations` and takes the largest `most`.
pub(crate) fn contenders(
    server: &RedisServer,
    processes: usize,
    args: &[String],
) -> (u64, u64, u64) {
    let children: Vec<_> = (0..processes)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_contender"))
                .arg(server.url())
                .args(args)
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn contender")
        })
        .collect();
    let (mut ops, mut violations, mut most) = (0u64, 0u64, 0u64);
    for child in children {
        let out = child.wait_with_output().expect("contender");
        assert!(out.status.success(), "contender failed: {out:?}");
        let line = String::from_utf8_lossy(&out.stdout);
        for field in line.split_whitespace() {
            match field.split_once('=') {
                Some(("ops", n)) => ops += n.parse::<u64>().unwrap(),
                Some(("violations", n)) => violations += n.parse::<u64>().unwrap(),
                Some(("most", n)) => most = most.max(n.parse::<u64>().unwrap()),
                _ => {}
            }
        }
    }
    (ops, violations, most)
}

/// The scheduled-job tick logic at length, once (each store runs a few
/// ticks of it in the conformance suite).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_job_runs_once_per_tick_at_length() {
    crate::conformance::scheduled_jobs_at_length(lock_testkit::TestStore::redis()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_processes() {
    let server = RedisServer::start();
    let (processes, keys, tasks, millis) = (3, 2, 4, 2500);
    let args = [keys, tasks, millis].map(|n: u64| n.to_string());
    let (ops, violations, _) = contenders(&server, processes, &args);
    let mut conn = server.connection().await;
    let mut counted = 0u64;
    for k in 0..keys {
        counted += conn
            .get::<_, Option<u64>>(format!("counter:{k}"))
            .await
            .unwrap()
            .unwrap_or(0);
    }
    println!("{processes} processes x {tasks} tasks: {ops} critical sections");
    assert!(ops > 50, "too little contention to mean anything: {ops}");
    assert_eq!(violations, 0, "two holders inside at once");
    assert_eq!(counted, ops, "lost updates");
    // Nothing of the locks is left behind.
    no_lock_keys_left(&mut conn).await;
}

/// A semaphore of 3 across 3 OS processes of 4 tasks each: never more than
/// 3 inside at once (counted in the store), and all 3 permits used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_bound_across_processes() {
    let server = RedisServer::start();
    let (processes, keys, tasks, millis, permits) = (3, 1, 4, 2000, 3);
    let args = [keys, tasks, millis, permits].map(|n: u64| n.to_string());
    let (ops, violations, most) = contenders(&server, processes, &args);
    assert!(ops > 50, "too little contention to mean anything: {ops}");
    assert_eq!(violations, 0, "more than {permits} holders at once");
    assert_eq!(most, permits, "the permits were never all in use");
    let mut conn = server.connection().await;
    no_lock_keys_left(&mut conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_restart_without_persistence() {
    let mut server = RedisServer::start();
    let mut last = FencingToken::new(0);
    for _ in 0..3 {
        let locker = locker(&server).await;
        for _ in 0..5 {
            let guard = locker.lock("restart").await.unwrap();
            assert!(guard.token() > last);
            last = guard.token();
            guard.release().await.unwrap();
        }
        // Held while the server dies: the holder is told.
        let held = locker
            .lock("restart")
            .ttl(Duration::from_millis(600))
            .await
            .unwrap();
        assert!(held.token() > last);
        last = held.token();
        server.restart();
        let err = tokio::time::timeout(Duration::from_millis(600) + SLACK, held.lost())
            .await
            .expect("loss told within the lease after a restart");
        assert!(matches!(err, LockError::Lost { .. }), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_promotion_of_a_lagging_replica() {
    let mut master = RedisServer::start();
    let replica = master.start_replica().await;
    let on_master = locker(&master).await;
    let mut last = FencingToken::new(0);
    for _ in 0..3 {
        let g = on_master.lock("promote").await.unwrap();
        last = g.token();
        g.release().await.unwrap();
    }
    master.wait_for_replicas(1).await;
    // The replica stops receiving (it keeps its data); the master goes on
    // minting.
    replica.detach().await;
    for _ in 0..5 {
        let g = on_master.lock("promote").await.unwrap();
        assert!(g.token() > last);
        last = g.token();
        g.release().await.unwrap();
    }
    let held = on_master.lock("promote").await.unwrap();
    last = last.max(held.token());
    master.kill();
    replica.promote().await;
    let on_replica = locker(&replica).await;
    // The promoted replica never saw the held lease: a second holder gets
    // in, and only its higher token can tell the two apart downstream.
    let promoted = on_replica.lock("promote").await.unwrap();
    assert!(
        promoted.token() > last,
        "token {} after promotion, {} before",
        promoted.token(),
        last
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bookkeeping_lapses_on_its_own() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    for i in 0..200 {
        let g = locker.lock(format!("order:{i}")).await.unwrap();
        g.release().await.unwrap();
    }
    let expired = locker
        .lock("order:expired")
        .ttl(Duration::from_millis(300))
        .watchdog(false)
        .await
        .unwrap();
    let lease = locker
        .stored_keys("order:expired")
        .unwrap()
        .lease()
        .to_owned();
    let _ = expired.lost().await;
    let mut conn = server.connection().await;
    // The lease ends in the store just after its holder is told: wait for
    // that (server state, no event to await), then nothing may be left.
    let gone = async {
        while redis::cmd("PTTL")
            .arg(&lease)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
            != -2
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(SLACK, gone)
        .await
        .expect("the lease outlived its ttl");
    // Only token records are left, each until the server clock is 10 s past
    // its token (none led the clock here).
    for key in all_keys(&mut conn).await {
        assert!(key.ends_with(":fence"), "left behind: {key}");
        let pttl: i64 = conn.pttl(&key).await.unwrap();
        assert!((1..=10_000).contains(&pttl), "{key}: PTTL {pttl} ms");
    }
}

/// Acquires and releases of concurrent tasks share script calls: the
/// server sees fewer calls than operations, every lock is taken and given
/// back in order (each task's tokens rise per key), and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_lock_operations_share_script_calls() {
    const TASKS: usize = 16;
    const ROUNDS: usize = 40;
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let mut conn = server.connection().await;
    let before = command_calls(&mut conn, "evalsha").await + command_calls(&mut conn, "eval").await;
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let mut last = [None::<FencingToken>; 4];
                for round in 0..ROUNDS {
                    let key = format!("order:{task}:{}", round % 4);
                    let guard = locker.lock(&key).await.unwrap();
                    let previous = last[round % 4].replace(guard.token());
                    assert!(
                        previous < Some(guard.token()),
                        "{key}: {previous:?} then {}",
                        guard.token()
                    );
                    guard.release().await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let calls =
        command_calls(&mut conn, "evalsha").await + command_calls(&mut conn, "eval").await - before;
    let operations = (TASKS * ROUNDS * 2) as u64;
    eprintln!("{operations} lock operations in {calls} script calls");
    assert!(
        calls < operations * 3 / 4,
        "{calls} script calls for {operations} lock operations"
    );
    let keys = lasting_keys(&mut conn).await;
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

/// The server's clock stepped back (up to the 10 s the token record
/// covers): tokens of every kind keep rising, after a release and past a
/// lock of another kind still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_when_the_server_clock_steps_back() {
    let clock = ClockShift::new();
    let server = RedisServer::options().launcher(clock.launcher()).start();
    let locker = locker(&server).await;
    let released = locker.lock("stepped").await.unwrap();
    let first = released.token();
    released.release().await.unwrap();
    let held = locker.write_lock("stepped:held").await.unwrap();
    let plain_before = locker.lock("stepped:plain").await.unwrap();
    let plain_first = plain_before.token();
    plain_before.release().await.unwrap();

    // Redis drops an expired key when it is next read: read each record a
    // while after its write, so that one kept for less than the 10 s is
    // gone before the step (the step would bring it back otherwise).
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut conn = server.connection().await;
    for key in ["stepped", "stepped:held", "stepped:plain"] {
        let record = token_record(&locker.stored_keys(key).unwrap());
        let _: bool = conn.exists(record).await.unwrap();
    }
    clock.set(Duration::from_secs(8), false);
    // The plain lock after its own release.
    let after = locker.lock("stepped").await.unwrap();
    assert!(after.token() > first, "{} after {first}", after.token());
    // A plain lock of a key whose write lock is held.
    let plain = locker.lock("stepped:held").await.unwrap();
    assert!(
        plain.token() > held.token(),
        "{} after the write lock's {}",
        plain.token(),
        held.token()
    );
    // Every other kind after a plain lock's release.
    for kind in [
        LockKind::Fair,
        LockKind::Read,
        LockKind::Permit { of: 2 },
        LockKind::Segment { of: 2 },
    ] {
        let guard = locker.lock_of("stepped:plain", kind).await.unwrap();
        assert!(
            guard.token() > plain_first,
            "{kind}: {} after {plain_first}",
            guard.token()
        );
        guard.release().await.unwrap();
    }
    for guard in [after, plain, held] {
        guard.release().await.unwrap();
    }
}

/// A token record ahead of the server clock (tokens minted faster than the
/// clock, or a clock stepped back) is honoured, and carried on past a lease
/// that expires or is released while its token still leads the clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_stay_ahead_of_a_record_that_leads_the_clock() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let keys = locker.stored_keys("ahead").unwrap();
    let mut conn = server.connection().await;
    let lead = record_a_leading_token(&mut conn, &keys).await;
    let short = |locker: &Locker| {
        locker
            .lock("ahead")
            .ttl(Duration::from_millis(100))
            .watchdog(false)
    };
    let first = short(&locker).await.unwrap();
    assert!(first.token().get() > lead, "{} <= {lead}", first.token());
    // The lease expires 3 s before the clock reaches its token.
    let lost = first.lost().await;
    assert!(matches!(lost, LockError::Lost { .. }), "{lost}");
    let second = short(&locker).await.unwrap();
    let second_token = second.token();
    assert!(second_token > first.token());
    second.release().await.unwrap();
    let third = short(&locker).await.unwrap();
    assert!(third.token() > second_token);
    third.release().await.unwrap();
    // The record lives until the clock is 10 s past the newest token.
    let pttl: i64 = conn.pttl(token_record(&keys)).await.unwrap();
    assert!(
        (10_000..=13_100).contains(&pttl),
        "token record PTTL {pttl} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loss_is_told_when_the_server_is_paused() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(900);
    let locker = Locker::builder()
        .ttl(ttl)
        .timeout(Duration::from_millis(200))
        .redis(&server.url())
        .await
        .unwrap();
    let other = locker.clone();
    let guard = locker.lock("paused").await.unwrap();
    let acquired = Instant::now();
    server.pause();
    let err = tokio::time::timeout(ttl + ttl / 3 + SLACK, guard.lost())
        .await
        .expect("the loss was not told");
    let told = acquired.elapsed();
    // Deadline (at most one ttl after the last confirmed renewal, which was
    // at most one interval before the pause) plus one interval.
    assert!(told <= ttl + ttl / 3 + SLACK, "told after {told:?}");
    assert!(matches!(err, LockError::Lost { .. }));
    assert!(!guard.is_held());
    server.resume();
    // After the pause the lease has run out in Redis too; another owner
    // gets the lock, and the stale release does not touch it.
    let next = other.lock("paused").wait(ttl + SLACK).await.unwrap();
    assert!(next.token() > guard.token());
    assert_lost(guard.release().await);
    assert!(next.is_held());
    let mut conn = server.connection().await;
    let owner: Option<String> = conn
        .get(locker.stored_keys("paused").unwrap().lease())
        .await
        .unwrap();
    assert!(owner.is_some(), "the new owner's lease was removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_servers_fail_fast_and_clearly() {
    let timeout = Duration::from_millis(300);
    // Nothing listens on a port that a server just left.
    let mut server = RedisServer::start();
    let url = server.url();
    server.kill();
    let started = Instant::now();
    let err = Locker::builder()
        .timeout(timeout)
        .redis(&url)
        .await
        .unwrap_err();
    assert!(
        started.elapsed() < timeout + SLACK,
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");

    // Server gone after connecting: acquire fails within the timeout.
    server.restart();
    let locker = Locker::builder()
        .timeout(timeout)
        .redis(&server.url())
        .await
        .unwrap();
    server.kill();
    let started = Instant::now();
    let err = locker.lock("down").await.unwrap_err();
    assert!(
        started.elapsed() < timeout + SLACK,
        "{:?}",
        started.elapsed()
    );
    match &err {
        LockError::Unavailable { key, .. } => assert_eq!(key, "down"),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("`down`"), "{err}");

    // Server frozen: acquire and release give up after the timeout.
    server.restart();
    let locker = Locker::builder()
        .timeout(timeout)
        .redis(&server.url())
        .await
        .unwrap();
    let held = locker.lock("frozen:held").await.unwrap();
    server.pause();
    let started = Instant::now();
    let err = locker.lock("frozen").await.unwrap_err();
    assert!(started.elapsed() < timeout + SLACK);
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    let started = Instant::now();
    assert!(held.release().await.is_err());
    assert!(started.elapsed() < timeout + SLACK);
    server.resume();
}

/// An acquire abandoned with its request on the way to a frozen server -
/// timed out, or its future dropped - may still take the lease when the
/// server wakes; that lease is given back then, not left to block every
/// other owner for its whole ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_abandoned_on_the_way_are_given_back() {
    let server = RedisServer::start();
    let ttl = Duration::from_secs(60);
    let builder = || {
        Locker::builder()
            .ttl(ttl)
            .timeout(Duration::from_millis(300))
    };
    let locker = builder().redis(&server.url()).await.unwrap();
    let other = builder().redis(&server.url()).await.unwrap();
    // Scripts loaded: a request held up by the freeze then runs as sent.
    locker
        .lock("warm-up")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    server.pause();
    let err = locker.lock("abandoned:timed-out").await.unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    // Dropped before its own store timeout.
    let dropped = tokio::time::timeout(
        Duration::from_millis(100),
        locker.lock("abandoned:dropped").into_future(),
    )
    .await;
    assert!(dropped.is_err(), "the frozen server cannot have answered");
    server.resume();
    for key in ["abandoned:timed-out", "abandoned:dropped"] {
        // A lease left behind would hold for a minute.
        let guard = other
            .lock(key)
            .wait(Duration::from_secs(10))
            .await
            .unwrap_or_else(|err| panic!("{key} was not given back: {err}"));
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_cost_few_commands() {
    const WAITERS: u64 = 1000;
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let mut conn = server.connection().await;
    let before = calls(&mut conn).await;
    let first = locker.lock("herd").await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let locker = locker.clone();
        tasks.push(tokio::spawn(async move {
            let guard = locker
                .lock("herd")
                .wait(Duration::from_secs(120))
                .await
                .unwrap();
            guard.release().await.unwrap();
        }));
    }
    // The herd is in line behind the holder before it leaves (no event
    // for a local line: polled).
    let lined_up = async {
        while locker.local_waiters("herd") < WAITERS as usize {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), lined_up)
        .await
        .expect("the waiters did not line up");
    first.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    let after = calls(&mut conn).await;
    let acquisitions = (WAITERS + 1) as f64;
    let sent = (after.0 - before.0) as f64 / acquisitions;
    // Minus our own INFO call.
    let all = (after.1 - before.1 - 1) as f64 / acquisitions;
    println!(
        "{WAITERS} waiters on one key: {sent:.2} commands sent per acquisition \
         ({all:.2} counting those run inside the scripts)"
    );
    assert!(sent <= 3.0, "{sent:.2} commands per acquisition");
    assert_eq!(locker.local_queues(), 0);
}

/// A release publishes only when another client found the lease held: the
/// uncontended path costs no PUBLISH, and a waiter in another process is
/// still woken by the release (not by the 30 s lease running out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_release_that_someone_waits_for_is_published() {
    let server = RedisServer::start();
    let holder = locker(&server).await;
    let waiter = locker(&server).await;
    let mut conn = server.connection().await;
    for i in 0..20 {
        let guard = holder.lock(format!("quiet:{i}")).await.unwrap();
        guard.release().await.unwrap();
    }
    assert_eq!(command_calls(&mut conn, "publish").await, 0);

    let guard = holder.lock("busy").await.unwrap();
    let keys = holder.stored_keys("busy").unwrap();
    let w = waiter.clone();
    let task = tokio::spawn(async move { w.lock("busy").wait(Duration::from_secs(20)).await });
    // The waiter has subscribed and then found the lease held, marking it.
    loop {
        let value: String = conn.get(keys.lease()).await.unwrap();
        if subscribers(&mut conn, &release_channel(&keys)).await > 0 && value.ends_with("|w") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let token = guard.token();
    let next = handed_over(guard, task).await;
    assert!(next.token() > token);
    assert_eq!(command_calls(&mut conn, "publish").await, 1);
    // The mark went with the released lease: the new one is unmarked.
    let value: String = conn.get(keys.lease()).await.unwrap();
    assert!(!value.ends_with("|w"), "{value}");
    next.release().await.unwrap();
    assert_eq!(command_calls(&mut conn, "publish").await, 1);
}

/// Releases `guard` and returns the lock `waiter` then takes, asserting it
/// came well before the 30 s lease ran out (so the release woke it).
async fn handed_over(
    guard: lock_core::LockGuard,
    waiter: tokio::task::JoinHandle<Result<lock_core::LockGuard, LockError>>,
) -> lock_core::LockGuard {
    let released = Instant::now();
    guard.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the waiter got the lock");
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "woken after {:?}",
        released.elapsed()
    );
    next
}

/// Subscribers of a pub/sub channel.
pub(crate) async fn subscribers(
    conn: &mut redis::aio::MultiplexedConnection,
    channel: &str,
) -> u64 {
    let (_, count): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .unwrap();
    count
}

/// (commands sent by clients, all commands including those inside scripts)
async fn calls(conn: &mut redis::aio::MultiplexedConnection) -> (u64, u64) {
    (
        lock_testkit::lock_commands_sent(conn).await,
        total_calls(conn).await,
    )
}

async fn total_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_keys_share_one_slot_and_never_collide() {
    let cluster = RedisServer::options().cluster().start();
    let mut conn = cluster.connection().await;
    let locker = Locker::memory();
    let inputs = [
        "order:42",
        "{",
        "}",
        "a{b}c",
        "{x}{y}",
        "*",
        "?",
        "[a-z]",
        "\\",
        "a\r\nDEL x",
        "nul\0",
        "%7B",
        "%",
        " ",
        "ключ",
        "{}",
        "}{",
    ];
    let mut seen = std::collections::HashSet::new();
    for input in inputs {
        let keys = locker.stored_keys(input).unwrap();
        let mut slots = Vec::new();
        for name in [keys.lease(), &token_record(&keys), &release_channel(&keys)] {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(name)
                .query_async(&mut conn)
                .await
                .unwrap();
            slots.push(slot);
            // One hash tag, and inside it only plain bytes and %XX escapes.
            assert_eq!(
                (name.matches('{').count(), name.matches('}').count()),
                (1, 1),
                "{name:?}"
            );
            let tag = name.split_once('{').unwrap().1.split_once('}').unwrap().0;
            assert!(
                tag.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:/@=+,;%".contains(&b)),
                "unescaped byte in {name:?}"
            );
        }
        assert!(
            slots.windows(2).all(|w| w[0] == w[1]),
            "{input:?}: slots {slots:?}"
        );
        assert!(seen.insert(keys.lease().to_owned()), "{input:?} collides");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_acknowledgement() {
    let master = RedisServer::start();
    let without = Locker::builder()
        .replicas(1, Duration::from_millis(100))
        .redis(&master.url())
        .await
        .unwrap();
    let err = without.lock("acked").await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::ReplicasNotConfirmed {
                wanted: 1,
                confirmed: 0,
                ..
            }
        ),
        "{err}"
    );
    // The unconfirmed lock was released.
    let plain = locker(&master).await;
    assert!(plain.try_lock("acked").await.unwrap().is_some());

    let _replica = master.start_replica().await;
    let with = Locker::builder()
        .replicas(1, Duration::from_secs(2))
        .redis(&master.url())
        .await
        .unwrap();
    let guard = with.lock("acked:2").await.unwrap();
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_survive_a_dropped_subscription_connection() {
    let server = RedisServer::start();
    let holder = locker(&server).await;
    let waiter = locker(&server).await;
    let guard = holder.lock("resub").await.unwrap();
    let w = waiter.clone();
    let task = tokio::spawn(async move { w.lock("resub").wait(Duration::from_secs(20)).await });
    // Wait until the waiter's subscription exists, then cut it.
    let mut conn = server.connection().await;
    loop {
        let channel = holder.stored_keys("resub").unwrap();
        if subscribers(&mut conn, &release_channel(&channel)).await > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _: redis::Value = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    // It re-subscribed and saw the release.
    let got = handed_over(guard, task).await;
    got.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_process_frees_the_lock_at_its_ttl() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(800);
    let mut child = Command::new(env!("CARGO_BIN_EXE_holder"))
        .args([server.url(), "killed".into(), ttl.as_millis().to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn holder");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let token: u64 = line
        .trim()
        .strip_prefix("token=")
        .expect("token line")
        .parse()
        .unwrap();
    child.kill().unwrap();
    let killed = Instant::now();
    child.wait().unwrap();
    let locker = locker(&server).await;
    let guard = locker
        .lock("killed")
        .wait(Duration::from_secs(10))
        .await
        .unwrap();
    let after = killed.elapsed();
    assert!(after <= ttl + SLACK, "freed after {after:?}");
    assert!(guard.token().get() > token);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_acquire_is_undone_by_owner_value() {
    let server = RedisServer::start();
    let timeout = Duration::from_millis(200);
    let impatient = Locker::builder()
        .timeout(timeout)
        .redis(&server.url())
        .await
        .unwrap();
    let mut admin = server.connection().await;
    // Commands queue behind the pause longer than the client waits: the
    // acquire times out on the client, then runs on the server.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(800)
        .query_async(&mut admin)
        .await
        .unwrap();
    let err = impatient.lock("ambiguous").await.unwrap_err();
    match &err {
        LockError::Unavailable { source, .. } => assert!(source.outcome_unknown(), "{err}"),
        other => panic!("{other}"),
    }
    let store = std::error::Error::source(&err).expect("the store error");
    assert!(
        store.to_string().contains("may have been applied"),
        "{store}"
    );
    // The background release by owner value removes the lock the paused
    // acquire took: another client gets it long before its 30 s lease ends.
    let other = locker(&server).await;
    let started = Instant::now();
    let guard = other
        .lock("ambiguous")
        .wait(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_subscription_connection_per_locker() {
    const KEYS: usize = 20;
    let server = RedisServer::start();
    let holder = locker(&server).await;
    let waiter = locker(&server).await;
    let mut guards = Vec::new();
    for k in 0..KEYS {
        guards.push(holder.lock(format!("fan:{k}")).await.unwrap());
    }
    let tasks: Vec<_> = (0..KEYS * 5)
        .map(|i| {
            let w = waiter.clone();
            tokio::spawn(async move {
                let g = w
                    .lock(format!("fan:{}", i % KEYS))
                    .wait(Duration::from_secs(30))
                    .await?;
                g.release().await
            })
        })
        .collect();
    let mut conn = server.connection().await;
    // Every key's head waiter has subscribed (one channel per key).
    loop {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("lock:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        if channels.len() == KEYS {
            break;
        }
        // Server-side state has no event to await: poll it.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(clients.lines().count(), 1, "{clients}");
    for g in guards {
        g.release().await.unwrap();
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    // The last waiter of each key unsubscribed.
    loop {
        let channels: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg("lock:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        if channels.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A value written in another format (a replica on another lock-core
/// version) is named with both versions and left alone: never taken as
/// free, never released, and it fails only its own operation in a shared
/// call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_of_another_format_are_named_and_left_alone() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let mut conn = server.connection().await;
    let lease = |keys: &StoredKeys| keys.lease().to_owned();
    let plant = |key: &str, name: fn(&StoredKeys) -> String, value: &str| {
        let keys = locker.stored_keys(key).unwrap();
        (name(&keys), value.to_owned())
    };
    let cases = [
        (plant("newer", lease, "2|them:1:1|123"), 2),
        (plant("older", lease, "d1f0:77:5|123"), 0),
        (plant("fence", token_record, "3|99"), 3),
    ];
    for ((name, value), _) in &cases {
        let _: () = conn.set_ex(name, value, 30).await.unwrap();
    }
    for (key, ((name, value), stored)) in ["newer", "older", "fence"].into_iter().zip(&cases) {
        // A long wait: the answer is the format, at once, not a timeout.
        let attempt = locker.lock(key).wait(Duration::from_secs(30));
        let err = tokio::time::timeout(Duration::from_secs(5), attempt)
            .await
            .expect("waited on a value of another format")
            .unwrap_err();
        assert!(
            matches!(&err, LockError::UnknownFormat { key: k, stored: s, ours: 1 } if k == key && s == stored),
            "{err}"
        );
        assert!(
            err.to_string().contains(&format!("format {stored}")),
            "{err}"
        );
        let left: String = conn.get(name).await.unwrap();
        assert_eq!(&left, value, "the value was touched");
    }
    // Acquires sharing script calls (more at once than calls in flight):
    // only those of planted keys fail.
    for i in (0..64).step_by(4) {
        let (name, value) = plant(&format!("newer:{i}"), lease, "2|them:1:1|123");
        let _: () = conn.set_ex(name, value, 30).await.unwrap();
    }
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let key = if i % 4 == 0 {
                    format!("newer:{i}")
                } else {
                    format!("fine:{i}")
                };
                locker.try_lock(key).await
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        match (i % 4, task.await.unwrap()) {
            (0, Err(LockError::UnknownFormat { .. })) => {}
            (0, other) => panic!("the planted key: {other:?}"),
            (_, taken) => taken.unwrap().expect("free").release().await.unwrap(),
        }
    }
    // A held lease rewritten in another format: its release says so and
    // leaves it.
    let guard = locker.lock("rewritten").await.unwrap();
    let lease = locker.stored_keys("rewritten").unwrap().lease().to_owned();
    let _: () = conn.set_ex(&lease, "2|them:1:1|5", 30).await.unwrap();
    let err = guard.release().await.unwrap_err();
    assert!(
        matches!(err, LockError::UnknownFormat { stored: 2, .. }),
        "{err}"
    );
    let left: String = conn.get(&lease).await.unwrap();
    assert_eq!(left, "2|them:1:1|5");
}

/// Permits are held side by side: while the token record leads the clock,
/// each new permit, and a lock on the key, still gets a token of its own
/// above every earlier one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_minted_ahead_of_the_clock_never_repeat() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let keys = locker.stored_keys("ahead-permits").unwrap();
    let mut conn = server.connection().await;
    let lead = record_a_leading_token(&mut conn, &keys).await;
    let a = locker.semaphore("ahead-permits", 3).await.unwrap();
    let b = locker.semaphore("ahead-permits", 3).await.unwrap();
    let c = locker.lock("ahead-permits").await.unwrap();
    let tokens = [a.token().get(), b.token().get(), c.token().get()];
    assert!(tokens[0] > lead, "{tokens:?} <= {lead}");
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    for guard in [a, b, c] {
        guard.release().await.unwrap();
    }
}

/// Writes a token record 3 s ahead of the server clock for `keys` (as
/// tokens minted faster than the clock, or a clock stepped back, leave) and
/// returns its token.
async fn record_a_leading_token(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &StoredKeys,
) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    let lead = secs * 1_000_000 + micros + 3_000_000;
    let _: () = conn
        .set_ex(token_record(keys), format!("1|{lead}"), 4)
        .await
        .unwrap();
    lead
}

/// Renewals due on one tick share script calls: 200 held locks renew in
/// fewer than half as many calls as renewals, and the one whose lease was taken away
/// is told lost while every other stays held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_renewals_tell_only_the_lost_lease() {
    const LOCKS: usize = 200;
    let server = RedisServer::start();
    let mut conn = server.connection().await;
    let ttl = Duration::from_millis(900);
    let locker = Locker::builder()
        .ttl(ttl)
        .redis(&server.url())
        .await
        .unwrap();
    let mut guards = Vec::new();
    for i in 0..LOCKS {
        guards.push(locker.lock(format!("many:{i}")).await.unwrap());
    }
    let calls = command_calls(&mut conn, "evalsha").await;
    let stolen = guards.remove(LOCKS / 2);
    let _: () = conn
        .del(locker.stored_keys(stolen.key()).unwrap().lease())
        .await
        .unwrap();
    let told = tokio::time::timeout(ttl / 3 + SLACK, stolen.lost())
        .await
        .expect("the stolen lease's loss was not told");
    assert!(matches!(told, LockError::Lost { .. }), "{told}");
    // Two more renewal rounds: every other lease is renewed and held.
    tokio::time::sleep(ttl * 2 / 3).await;
    assert!(guards.iter().all(|g| g.is_held()), "another lease was lost");
    let renewals = LOCKS * 2;
    let calls = command_calls(&mut conn, "evalsha").await - calls;
    // One call per renewal unbatched; about 50 alone, and up to 107 seen
    // beside 8 other tests (a loaded process splits the ticks' batches).
    assert!(
        calls < renewals as u64 / 2,
        "{calls} script calls for about {renewals} renewals"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
}

/// The last reader's release wakes the writer waiting behind it and not
/// the reader waiting behind that writer; the writer's release then lets
/// the reader in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_only_the_waiters_that_may_go_on() {
    let store = lock_testkit::TestStore::redis();
    let first = store.locker().await;
    let (writer_side, writer_asks) = store.locker_with(|l| l).await;
    let (reader_side, reader_asks) = store.locker_with(|l| l).await;
    let reading = first.read_lock("page").await.unwrap();
    let asked = writer_asks.acquires();
    let writer = tokio::spawn(async move {
        writer_side
            .write_lock("page")
            .wait(Duration::from_secs(10))
            .await
    });
    // Queued, subscribed, asked again: it waits on its own channel.
    writer_asks.acquires_reach(asked + 2).await;
    let asked = reader_asks.acquires();
    let reader = tokio::spawn(async move {
        reader_side
            .read_lock("page")
            .wait(Duration::from_secs(10))
            .await
    });
    reader_asks.acquires_reach(asked + 2).await;
    let reader_asked = reader_asks.acquires();
    reading.release().await.unwrap();
    let writing = tokio::time::timeout(SLACK * 4, writer)
        .await
        .expect("the writer was not woken")
        .unwrap()
        .unwrap();
    // The reader behind the writer's mark was left asleep.
    assert_eq!(
        reader_asks.acquires(),
        reader_asked,
        "the blocked reader was woken"
    );
    writing.release().await.unwrap();
    let read = tokio::time::timeout(SLACK * 4, reader)
        .await
        .expect("the reader was not let in after the writer")
        .unwrap()
        .unwrap();
    read.release().await.unwrap();
}

/// An inspection lists a fair queue's waiters by their place in line (the
/// entries' seq), not by where the server keeps them, and lists the first
/// 100 of a longer line while counting them all. The entries are written
/// straight into the queue, past the hash's compact encoding (which keeps
/// insertion order) and out of order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspection_lists_fair_waiters_in_line_whatever_the_stored_order() {
    let server = RedisServer::start();
    let locker = locker(&server).await;
    let queue = locker
        .stored_keys("ledger")
        .unwrap()
        .of_kind(LockKind::Fair);
    let mut conn = server.connection().await;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let expiry = secs * 1000 + micros / 1000 + 30_000;
    // Seqs 1..=150, written in a scrambled order (37 is prime to 150).
    let seqs: Vec<u64> = (0..150).map(|i| (i * 37) % 150 + 1).collect();
    let mut write = redis::pipe();
    for &seq in &seqs {
        let owner = format!("w{seq:03}:00000000000000ab:1:{seq}");
        write.hset(&queue, owner, format!("1|0|{expiry}|{seq}"));
    }
    write.hset(&queue, "#", "1|150");
    let () = write.query_async(&mut conn).await.unwrap();

    let waiters = locker.inspect("ledger").await.unwrap().waiters;
    assert_eq!(waiters.queued, 150);
    assert_eq!(waiters.queue.len(), lock_core::MAX_LISTED_WAITERS);
    let line: Vec<String> = waiters
        .queue
        .iter()
        .map(|w| w.owner[..4].to_owned())
        .collect();
    let expected: Vec<String> = (1..=100).map(|seq| format!("w{seq:03}")).collect();
    assert_eq!(line, expected);
    assert!(waiters.queue.iter().all(|w| w.kind == LockKind::Fair));
}
