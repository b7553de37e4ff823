//! Connections that heal: a restart, a cut connection or a release that
//! cannot get through is not seen by the callers; what no retry fixes (the
//! URL, credentials, access rules) is told apart, at connect.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::RedisBackend;
use lock_core::{LockError, Locker};
use lock_testkit::{Counting, DelayProxy, RedisServer, command_calls, release_channel};
use tokio::time::Instant;

use crate::redis_only::subscribers;

/// Margin on time bounds that are part of the contract.
const SLACK: Duration = Duration::from_millis(750);

async fn locker(url: &str) -> Locker {
    Locker::redis(url).await.expect("connect")
}

/// `CLIENT KILL TYPE <kind>` of every such connection but the caller's;
/// returns how many were cut.
async fn kill_clients(server: &RedisServer, kind: &str) -> u64 {
    let mut admin = server.connection().await;
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg(kind)
        .query_async(&mut admin)
        .await
        .expect("CLIENT KILL")
}

/// A server, a proxy in front of it, a Locker through the proxy with
/// request bound `timeout`, and a Locker straight to the server.
async fn behind_a_proxy(timeout: Duration) -> (RedisServer, DelayProxy, Locker, Locker) {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let through = Locker::builder()
        .timeout(timeout)
        .redis(&proxy.url())
        .await
        .unwrap();
    let direct = locker(&server.url()).await;
    (server, proxy, through, direct)
}

/// Waits until `server` has the key `lease` (server-side state has no
/// event to await: polled).
async fn stored(server: &RedisServer, lease: &str) {
    let mut admin = server.connection().await;
    while !redis::cmd("EXISTS")
        .arg(lease)
        .query_async::<bool>(&mut admin)
        .await
        .unwrap()
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asserts `key` is still held (for `direct`), heals `proxy`, and asserts
/// `direct` gets the key within about a second: a release or undo that
/// kept trying got through (the lease itself had 20 s left).
async fn freed_soon_after_the_heal(proxy: &DelayProxy, direct: &Locker, key: &str) {
    let held = direct.try_lock(key).await.unwrap();
    assert!(held.is_none(), "{key}: nothing could reach the server");
    proxy.heal();
    let healed = Instant::now();
    let next = direct
        .lock(key)
        .wait(Duration::from_secs(15))
        .await
        .unwrap();
    assert!(
        healed.elapsed() < Duration::from_secs(1) + SLACK,
        "{key}: freed {:?} after the network healed (ttl 20 s)",
        healed.elapsed()
    );
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_lock_after_a_restart_succeeds_on_every_locker() {
    let mut server = RedisServer::start();
    let (once, waiting) = (locker(&server.url()).await, locker(&server.url()).await);
    for locker in [&once, &waiting] {
        locker.lock("warm").await.unwrap().release().await.unwrap();
    }
    server.restart();
    // No wait at all: only sending again on a fresh connection can save it.
    let first = once.try_lock("after:once").await;
    let first = first
        .expect("the first lock after a restart")
        .expect("free");
    let second = waiting
        .lock("after:waiting")
        .wait(Duration::from_secs(2))
        .await
        .expect("the first lock after a restart");
    first.release().await.unwrap();
    second.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cut_connections_heal_unseen_by_holder_and_waiter() {
    let server = RedisServer::start();
    let ttl = Duration::from_secs(2);
    let (holder, waiter) = (locker(&server.url()).await, locker(&server.url()).await);
    let guard = holder.lock("cut").ttl(ttl).await.unwrap();
    let task = tokio::spawn(async move { waiter.lock("cut").wait(Duration::from_secs(20)).await });
    let channel = holder.stored_keys("cut").unwrap();
    let mut admin = server.connection().await;
    while subscribers(&mut admin, &release_channel(&channel)).await == 0 {
        // Server-side state has no event to await: poll it.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        kill_clients(&server, "normal").await >= 2,
        "both Lockers' connections"
    );
    assert_eq!(
        kill_clients(&server, "pubsub").await,
        1,
        "the waiter's subscription"
    );
    // Past a whole ttl after the cut, only renewals sent on fresh
    // connections can have kept the lease.
    tokio::select! {
        lost = guard.lost() => panic!("the lease was lost across a cut connection: {lost}"),
        _ = tokio::time::sleep(ttl + ttl / 2) => {}
    }
    assert!(guard.is_held());
    assert!(!task.is_finished(), "the waiter gave up: {:?}", task.await);
    let released = Instant::now();
    guard.release().await.expect("no error reaches the holder");
    let next = task.await.unwrap().expect("no error reaches the waiter");
    assert!(
        released.elapsed() < Duration::from_secs(1) + SLACK,
        "handed over after {:?}",
        released.elapsed()
    );
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_into_a_dead_connection_is_sent_again() {
    let server = RedisServer::start();
    let (holder, other) = (locker(&server.url()).await, locker(&server.url()).await);
    let guard = holder
        .lock("dead")
        .ttl(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(kill_clients(&server, "normal").await >= 1);
    guard
        .release()
        .await
        .expect("sent again on a fresh connection");
    let next = other.try_lock("dead").await.unwrap();
    next.expect("free at once, not after its 20 s ttl")
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_cannot_get_through_is_retried_until_it_does() {
    let (_server, proxy, through, direct) = behind_a_proxy(Duration::from_millis(300)).await;
    let guard = through
        .lock("retried")
        .ttl(Duration::from_secs(20))
        .await
        .unwrap();
    proxy.cut();
    let err = guard.release().await.unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    freed_soon_after_the_heal(&proxy, &direct, "retried").await;
}

/// Asserts a connect error is refused, names no environment variable,
/// carries its cause and took no waiting.
fn assert_refusal(err: &LockError, started: Instant, fix: &str) {
    let message = err.to_string();
    assert!(message.contains(fix), "{message}");
    assert!(!message.contains("REDIS_URL"), "{message}");
    assert!(err.source().is_some(), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(1) + SLACK,
        "{message}: after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_and_access_errors_are_told_apart_at_connect() {
    let server = RedisServer::options()
        .arg("--requirepass")
        .arg("secret")
        // An ACL user that may not touch the lock's keys.
        .args(["--user", "outsider", "on", ">pw", "~other:*", "&*", "+@all"])
        .start();
    let port = server.port();
    let connect = |url: String| async move {
        let started = Instant::now();
        let result = Locker::builder()
            .timeout(Duration::from_secs(1))
            .redis(&url)
            .await;
        (result.map(drop), started)
    };

    let (result, started) = connect(format!("redis://127.0.0.1:{port}x")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert_refusal(&err, started, "redis://");

    // (`rediss` is refused the same way in a build without `tls`.)
    let (result, started) = connect(format!("memcached://127.0.0.1:{port}")).await;
    match result.unwrap_err() {
        err @ LockError::UnsupportedScheme { .. } => {
            assert_refusal(&err, started, "`memcached`");
        }
        other => panic!("{other}"),
    }

    let (result, started) = connect(format!("redis://:wrong@127.0.0.1:{port}")).await;
    let err = result.unwrap_err();
    assert!(
        matches!(err, LockError::AuthenticationFailed { .. }),
        "{err}"
    );
    assert_refusal(&err, started, "password");

    let (result, started) = connect(format!("redis://127.0.0.1:{port}")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LockError::PasswordRequired { .. }), "{err}");
    assert_refusal(&err, started, "password");

    let (result, started) = connect(format!("redis://outsider:pw@127.0.0.1:{port}")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LockError::PermissionDenied { .. }), "{err}");
    assert_refusal(&err, started, "grant");

    let (result, _) = connect(format!("redis://:secret@127.0.0.1:{port}")).await;
    result.expect("the right password connects");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_denied_while_locking_is_not_waited_out() {
    let server = RedisServer::options()
        .args(["--user", "locks", "on", ">pw", "~*", "&*", "+@all"])
        .start();
    let locker = locker(&format!("redis://locks:pw@127.0.0.1:{}", server.port())).await;
    let mut admin = server.connection().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "locks", "-evalsha", "-eval"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let started = Instant::now();
    let err = locker
        .lock("denied")
        .wait(Duration::from_secs(10))
        .await
        .unwrap_err();
    match &err {
        LockError::PermissionDenied { key, .. } => assert_eq!(key, "denied"),
        other => panic!("{other}"),
    }
    assert!(started.elapsed() < SLACK, "waited {:?}", started.elapsed());
}

/// A Locker through `proxy` with request bound `timeout`, and the task of
/// one of its requests waiting for `key` (held elsewhere) up to `wait`,
/// once it has subscribed to the key's releases.
async fn waiting_through(
    server: &RedisServer,
    proxy: &DelayProxy,
    timeout: Duration,
    key: &'static str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<lock_core::LockGuard, LockError>> {
    let waiter = Locker::builder()
        .timeout(timeout)
        .redis(&proxy.url())
        .await
        .unwrap();
    let channel = waiter.stored_keys(key).unwrap();
    let task = tokio::spawn(async move { waiter.lock(key).wait(wait).await });
    let mut admin = server.connection().await;
    while subscribers(&mut admin, &release_channel(&channel)).await == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_waits_through_a_short_outage() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let holder = locker(&server.url()).await;
    let guard = holder.lock("outage").await.unwrap();
    let wait = Duration::from_secs(20);
    let task = waiting_through(&server, &proxy, Duration::from_secs(3), "outage", wait).await;
    proxy.cut();
    // Released while the waiter cannot hear of it.
    guard.release().await.unwrap();
    // Longer than one request can bridge (its second send waits for the
    // connection manager's reconnect attempts, about 300 ms), shorter than
    // the timeout.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(
        !task.is_finished(),
        "gave up in the outage: {:?}",
        task.await
    );
    proxy.heal();
    let healed = Instant::now();
    let next = task.await.unwrap().expect("no error reaches the waiter");
    assert!(
        healed.elapsed() < Duration::from_secs(1) + SLACK,
        "taken {:?} after the network healed",
        healed.elapsed()
    );
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_fails_waiters_in_about_the_timeout_naming_the_store_error() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let holder = locker(&server.url()).await;
    let _held = holder.lock("away").await.unwrap();

    // The store stays away past the timeout: not the whole 20 s wait.
    let timeout = Duration::from_millis(500);
    let task = waiting_through(&server, &proxy, timeout, "away", Duration::from_secs(20)).await;
    proxy.cut();
    let cut = Instant::now();
    let err = task.await.unwrap().unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    assert!(
        cut.elapsed() < timeout + SLACK,
        "failed after {:?}",
        cut.elapsed()
    );
    proxy.heal();

    // The wait runs out within the outage: the store error, not a timeout.
    let wait = Duration::from_millis(600);
    let task = waiting_through(&server, &proxy, Duration::from_secs(2), "away", wait).await;
    proxy.cut();
    let err = task.await.unwrap().unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    let store = err.source().expect("the store error").to_string();
    assert!(
        !store.contains("within"),
        "a connection error, not a timeout: {store}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_applied_but_unanswered_is_reported_as_ambiguous() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let through = locker(&proxy.url()).await;
    // Scripts loaded: the held-back release then runs as sent.
    through.lock("warm").await.unwrap().release().await.unwrap();
    let guard = through
        .lock("unanswered")
        .ttl(Duration::from_secs(20))
        .await
        .unwrap();
    let lease = through
        .stored_keys("unanswered")
        .unwrap()
        .lease()
        .to_owned();
    proxy.hold_replies();
    let release = tokio::spawn(guard.release());
    let mut admin = server.connection().await;
    while redis::cmd("EXISTS")
        .arg(&lease)
        .query_async::<bool>(&mut admin)
        .await
        .unwrap()
    {
        // Server-side state has no event to await: poll it.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The release was applied; its reply dies with the connection. Sent
    // again, it finds no lease: released by its first send, or lost before?
    proxy.sever();
    proxy.release();
    match release.await.unwrap().unwrap_err() {
        LockError::Unavailable { source, .. } => assert!(source.outcome_unknown(), "{source}"),
        other => panic!("neither released nor lost for sure, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_lease_through_an_outage_and_tells_the_loss_at_the_deadline() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let through = Locker::builder()
        .timeout(Duration::from_millis(300))
        .redis(&proxy.url())
        .await
        .unwrap();
    let ttl = Duration::from_secs(3);
    let guard = through.lock("renewed").ttl(ttl).await.unwrap();
    // Renewals fall due every second; this outage fails at least one of
    // them (and its second send) but ends well before the deadline.
    proxy.cut();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    proxy.heal();
    tokio::select! {
        lost = guard.lost() => panic!("lost through an outage shorter than the lease: {lost}"),
        _ = tokio::time::sleep(ttl) => {}
    }
    assert!(guard.is_held());
    guard.release().await.unwrap();

    // A store that stays away: the loss is told at the local deadline,
    // not at the first failed renewal.
    let ttl = Duration::from_secs(2);
    let guard = through.lock("renewed").ttl(ttl).await.unwrap();
    let acquired = Instant::now();
    proxy.cut();
    let lost = guard.lost().await;
    assert!(matches!(lost, LockError::Lost { .. }), "{lost}");
    let after = acquired.elapsed();
    assert!(
        after > ttl - Duration::from_millis(200) && after < ttl + SLACK,
        "lost after {after:?} (ttl {ttl:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_whose_release_cannot_get_through_is_released_later() {
    let (_server, proxy, through, direct) = behind_a_proxy(Duration::from_millis(300)).await;
    let guard = through
        .lock("dropped")
        .ttl(Duration::from_secs(20))
        .await
        .unwrap();
    proxy.cut();
    drop(guard);
    // Longer than the dropped guard's own release can take (sent twice
    // within 300 ms): only a later send can free the key.
    tokio::time::sleep(Duration::from_millis(800)).await;
    freed_soon_after_the_heal(&proxy, &direct, "dropped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_left_in_doubt_by_an_outage_is_undone() {
    let (server, proxy, through, direct) = behind_a_proxy(Duration::from_secs(3)).await;
    // Scripts loaded: the held-back acquire then runs as sent.
    through.lock("warm").await.unwrap().release().await.unwrap();
    let lease = through.stored_keys("doubt").unwrap().lease().to_owned();
    proxy.hold_replies();
    // The wait ends before the outage bound (the 3 s timeout), after a
    // refused try (its outcome known), not after one cut off by the bound.
    let acquire = tokio::spawn(async move {
        let request = through.lock("doubt").ttl(Duration::from_secs(20));
        request.wait(Duration::from_secs(1)).await
    });
    stored(&server, &lease).await;
    // The acquire took the lease, but its reply is lost and every try after
    // it is refused (outcomes known): the first one stays in doubt.
    proxy.cut();
    proxy.release();
    let err = acquire.await.unwrap().unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
    // Longer than the undo's own release takes to be refused twice: only a
    // later send can free the key.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    freed_soon_after_the_heal(&proxy, &direct, "doubt").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_subscription_is_an_error_not_a_silent_poll() {
    // No `&` pattern: no pub/sub channel at all (Redis 7's default).
    let server = RedisServer::options()
        .args(["--user", "deaf", "on", ">pw", "~*", "+@all"])
        .start();
    let holder = locker(&server.url()).await;
    let _held = holder.lock("deaf").await.unwrap();
    let waiter = locker(&format!("redis://deaf:pw@127.0.0.1:{}", server.port())).await;
    let started = Instant::now();
    let err = waiter
        .lock("deaf")
        .wait(Duration::from_secs(10))
        .await
        .unwrap_err();
    match &err {
        LockError::PermissionDenied { key, .. } => assert_eq!(key, "deaf"),
        other => panic!("{other}"),
    }
    assert!(started.elapsed() < SLACK, "waited {:?}", started.elapsed());
}

/// A release retried in the background reaches the server after the lease
/// passed to another owner (force-released, then taken): owner-checked, it
/// leaves the new holder's lease alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_release_leaves_the_next_owner_alone() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let timeout = Duration::from_millis(300);
    let backend = RedisBackend::connect(&proxy.url(), timeout).await.unwrap();
    let counts = Counting::new(Arc::new(backend));
    let through = Locker::builder()
        .timeout(timeout)
        .backend(counts.clone())
        .unwrap();
    let direct = locker(&server.url()).await;
    let guard = through
        .lock("passed")
        .ttl(Duration::from_secs(20))
        .await
        .unwrap();
    proxy.cut();
    // Its release fails: from now on only the background retry can send.
    drop(guard);
    counts.releases_reach(1).await;
    assert_eq!(direct.force_release("passed").await.unwrap().removed, 1);
    let next = direct.lock("passed").await.unwrap();
    let lease = direct.stored_keys("passed").unwrap().lease().to_owned();
    let mut admin = server.connection().await;
    let scripts = command_calls(&mut admin, "evalsha").await;
    proxy.heal();
    // The retry got through (the next script the server runs: `next` renews
    // only after 10 s). Server-side counts have no event: polled.
    let retried = async {
        while command_calls(&mut admin, "evalsha").await == scripts {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), retried)
        .await
        .expect("the release was not retried after the heal");
    let value: Option<String> = redis::cmd("GET")
        .arg(&lease)
        .query_async(&mut admin)
        .await
        .unwrap();
    let token = value.as_deref().and_then(|v| v.split('|').nth(2));
    assert_eq!(
        token,
        Some(next.token().get().to_string().as_str()),
        "the retried release removed the next owner's lease ({value:?})"
    );
    next.release().await.unwrap();
}

/// The local deadline counts from the acquire's send: a reply held back
/// for half the ttl leaves the guard about half the ttl, not a whole one
/// (s03 covers a reply later than the whole lease).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_reply_leaves_the_guard_only_what_is_left_of_the_lease() {
    let (server, proxy, through, _direct) = behind_a_proxy(Duration::from_secs(10)).await;
    // Scripts loaded: the held-back acquire then runs as sent.
    through.lock("warm").await.unwrap().release().await.unwrap();
    let ttl = Duration::from_secs(4);
    let lease = through.stored_keys("late").unwrap().lease().to_owned();
    proxy.hold_replies();
    let acquire = tokio::spawn(async move {
        let guard = through.lock("late").ttl(ttl).watchdog(false).await;
        (guard, through)
    });
    stored(&server, &lease).await;
    // The fault under test: the reply is held for half the lease.
    tokio::time::sleep(ttl / 2).await;
    proxy.release();
    let (guard, _through) = acquire.await.unwrap();
    let guard = guard.expect("the lease is granted, late");
    let left = guard.expires_in();
    assert!(guard.is_held());
    assert!(
        left < ttl * 3 / 4,
        "{left:?} left of a {ttl:?} lease whose reply came {:?} after its send",
        ttl / 2
    );
    guard.release().await.unwrap();
}

/// A leader's campaign through a store that is down (its connection cut)
/// goes on until the store is back: `run_as_leader` waits it out, and the
/// body runs once the store answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_leader_waits_out_a_store_that_is_down() {
    let server = RedisServer::start();
    let proxy = DelayProxy::start(server.port()).await;
    let timeout = Duration::from_millis(200);
    let backend = RedisBackend::connect(&proxy.url(), timeout).await.unwrap();
    let counts = Counting::new(Arc::new(backend));
    let through = Locker::builder()
        .timeout(timeout)
        .ttl(Duration::from_millis(600))
        .backend(counts.clone())
        .unwrap();
    proxy.cut();
    let (told, mut leading) = tokio::sync::mpsc::unbounded_channel();
    let campaign = tokio::spawn(async move {
        through
            .run_as_leader("relay", |term| {
                let _ = told.send(term.token());
                std::future::pending::<Result<(), LockError>>()
            })
            .await
    });
    // Several attempts fail while the store is down (each within the
    // timeout): the campaign goes on.
    let tried = tokio::time::timeout(Duration::from_secs(10), counts.acquires_reach(4)).await;
    assert!(
        !campaign.is_finished(),
        "the campaign gave up: {:?}",
        campaign.await
    );
    tried.expect("the campaign stopped trying");
    proxy.heal();
    let led = tokio::time::timeout(Duration::from_secs(10), leading.recv()).await;
    assert!(led.expect("no lead after the store came back").is_some());
    campaign.abort();
}
