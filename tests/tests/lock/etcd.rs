//! The etcd backend's own promises, beyond the conformance suite (which
//! runs on a single etcd member too): one lease and one keep-alive for
//! many locks, ttls granted in whole seconds, a revoked lease told on
//! every guard, waiting without requests, the store picked by URL
//! scheme, and puts that land after their acquire gave up taking nothing.

use std::future::IntoFuture;
use std::time::Duration;

use futures_util::future::join_all;
use lock_core::backend::{Attempt, EtcdBackend, LockStore, StoredKeys};
use lock_core::{LockError, LockKind, Locker};
use lock_testkit::{DelayProxy, EtcdServer, TestStore, etcd_client, etcd_keys};

use crate::conformance::SLACK;

async fn locker(member: &EtcdServer, ttl: Duration) -> Locker {
    Locker::builder()
        .ttl(ttl)
        .etcd(&[member.endpoint().as_str()])
        .await
        .expect("connect to the test etcd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_of_one_ttl_share_one_lease_and_renew_together() {
    let member = EtcdServer::start();
    let locker = locker(&member, Duration::from_secs(1)).await;
    let guards = join_all((0..50).map(|i| locker.lock(format!("many:{i}")).into_future())).await;
    let guards: Vec<_> = guards.into_iter().map(Result::unwrap).collect();
    let (keep_alives, txns) = (member.requests("LeaseKeepAlive"), member.requests("Txn"));
    // Three ttls held: nine renewals of each lock.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let keep_alives = member.requests("LeaseKeepAlive") - keep_alives;
    let txns = member.requests("Txn") - txns;
    assert!(guards.iter().all(|g| g.is_held()), "a lock was lost");
    let leases = etcd_client(&member).await.leases().await.unwrap();
    assert_eq!(leases.leases().len(), 1, "one lease for all 50 locks");
    // A call per lock and renewal would be 450 of each.
    assert!(
        keep_alives <= 60,
        "{keep_alives} keep-alives for 50 locks in 3 s"
    );
    assert!(txns <= 60, "{txns} transactions for 50 locks in 3 s");
    println!("50 locks held 3 s: {keep_alives} keep-alives, {txns} transactions");
    for guard in guards {
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ttl_is_granted_in_whole_seconds_and_at_least_the_minimum() {
    let member = EtcdServer::start();
    let locker = locker(&member, Duration::from_secs(30)).await;
    // The kit's members have a minimum of 1 s (1.5 election timeouts).
    let short = locker
        .lock("short")
        .ttl(Duration::from_millis(300))
        .await
        .unwrap();
    assert_eq!(short.ttl(), Duration::from_secs(1));
    // The deadline follows the ttl granted, not the one asked for.
    let left = short.expires_in();
    assert!(
        left > Duration::from_millis(600) && left <= Duration::from_secs(1),
        "{left:?}"
    );
    let odd = locker
        .lock("odd")
        .ttl(Duration::from_millis(1500))
        .await
        .unwrap();
    assert_eq!(odd.ttl(), Duration::from_secs(2));
    let default = locker.lock("default").await.unwrap();
    assert_eq!(default.ttl(), Duration::from_secs(30));
    for guard in [short, odd, default] {
        guard.release().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_lease_is_told_on_every_guard_under_it() {
    let member = EtcdServer::start();
    let ttl = Duration::from_secs(3);
    let holder = locker(&member, ttl).await;
    let other = locker(&member, ttl).await;
    let mut guards = Vec::new();
    for i in 0..5 {
        guards.push(holder.lock(format!("revoked:{i}")).await.unwrap());
    }
    let mut client = etcd_client(&member).await;
    let leases = client.leases().await.unwrap();
    let [lease] = leases.leases() else {
        panic!("{} leases for one ttl", leases.leases().len());
    };
    client.lease_revoke(lease.id()).await.unwrap();
    // Free for others at once: the entries went with the lease.
    let taken = other.try_lock("revoked:0").await.unwrap();
    assert!(taken.is_some(), "the revoked lease's lock is still held");
    for guard in &guards {
        let told = tokio::time::timeout(ttl / 3 + SLACK, guard.lost()).await;
        assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
    }
    // The Locker goes on with a new lease.
    let again = holder.lock("revoked:1").await.unwrap();
    assert!(again.token() > guards[1].token());
    again.release().await.unwrap();
    taken.unwrap().release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_picks_the_store_by_url_scheme() {
    let member = EtcdServer::start();
    let url = EtcdServer::url(std::slice::from_ref(&member));
    let locker = Locker::connect(&url).await.unwrap();
    let guard = locker.lock("by-url").await.unwrap();
    guard.release().await.unwrap();
    for bad in ["etcd://127.0.0.1", "127.0.0.1:2379"] {
        let err = Locker::connect(bad).await.unwrap_err();
        assert!(matches!(err, LockError::InvalidUrl { .. }), "{bad}: {err}");
    }
    let err = Locker::connect("consul://127.0.0.1:8500")
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LockError::UnsupportedScheme { scheme, .. } if scheme == "consul"),
        "{err}"
    );
    // Nothing listens on port 1.
    let err = Locker::builder()
        .timeout(Duration::from_millis(500))
        .connect("etcd://127.0.0.1:1")
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Unavailable { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sends_nothing_while_it_waits() {
    let store = TestStore::etcd();
    let TestStore::Etcd(member) = &store else {
        unreachable!("an etcd store")
    };
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l).await;
    let held = holder.lock("quiet").await.unwrap();
    let waiting =
        tokio::spawn(async move { waiter.lock("quiet").wait(Duration::from_secs(20)).await });
    // Refused twice (before and after subscribing): it waits on its watch.
    counts.acquires_reach(2).await;
    let methods = [
        "Txn",
        "Range",
        "DeleteRange",
        "LeaseGrant",
        "LeaseKeepAlive",
        "Watch",
    ];
    let count = || methods.map(|m| member.requests(m));
    let before = count();
    // The hold is the point: a waiter that polled every 100 ms would ask
    // about 15 times.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(count(), before, "requests while waiting ({methods:?})");
    held.release().await.unwrap();
    let next = tokio::time::timeout(SLACK, waiting)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    next.release().await.unwrap();
}

/// A backend whose requests go through a proxy to `member`, and a Locker
/// straight to it.
async fn through_a_proxy(member: &EtcdServer) -> (DelayProxy, EtcdBackend, Locker) {
    let proxy = DelayProxy::start(member.port()).await;
    let endpoint = format!("http://127.0.0.1:{}", proxy.port());
    let backend = EtcdBackend::connect(&[endpoint.as_str()], Duration::from_secs(1))
        .await
        .unwrap();
    // Its lease granted now: the next put is the first request an acquire sends.
    let warm = StoredKeys::new("lock", "warm").unwrap();
    backend
        .acquire(&warm, LockKind::Exclusive, "warm-owner", LEASE)
        .await
        .unwrap();
    assert!(
        backend
            .release(&warm, LockKind::Exclusive, "warm-owner")
            .await
            .unwrap()
    );
    (proxy, backend, locker(member, LEASE).await)
}

/// The lease of the late-put tests: alive long after a put lands late, so
/// that only the mark can stop it.
const LEASE: Duration = Duration::from_secs(60);

/// Sends `owner`'s ask for `keys` through `proxy` and strands it: its put
/// is in the proxy, its client cut off. `Err` if it was dropped unanswered,
/// else what the backend answered once cut off.
async fn strand_an_ask(
    proxy: &DelayProxy,
    backend: &EtcdBackend,
    keys: &StoredKeys,
    kind: LockKind,
    owner: &str,
    answer: bool,
) -> Option<Result<Attempt, lock_core::StoreError>> {
    // The put names its entry.
    let side = match kind {
        LockKind::Read => "r/",
        LockKind::Write => "w/",
        _ => "",
    };
    let entry = format!("{}/{side}{owner}", keys.of_kind(kind));
    let ask = backend.acquire(keys, kind, owner, LEASE);
    strand(proxy, ask, &entry, answer).await
}

/// Sends `request` through `proxy` and strands it once the bytes held name
/// `needle`; then drops it, or (`answer`) awaits what it says cut off.
async fn strand<T: std::fmt::Debug>(
    proxy: &DelayProxy,
    request: impl std::future::Future<Output = T>,
    needle: &str,
    answer: bool,
) -> Option<T> {
    proxy.hold();
    tokio::pin!(request);
    tokio::select! {
        answered = &mut request => panic!("answered while held: {answered:?}"),
        () = proxy.requests_hold(needle) => {}
    }
    proxy.strand();
    match answer {
        true => Some(request.await),
        false => None,
    }
}

/// `request` again while it fails transiently, as an acquire and the
/// undo of one do while a connection is re-established.
async fn retried<T, F>(mut request: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Result<T, lock_core::StoreError>>,
{
    let mut last = None;
    for _ in 0..100 {
        match request().await {
            Ok(answer) => return answer,
            Err(err) if err.is_transient() => last = Some(err),
            Err(err) => panic!("{err}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("still failing after 100 tries: {last:?}")
}

/// Lets the `n` stranded transactions reach `member`, and waits until
/// they are answered.
async fn lands_late(proxy: &DelayProxy, member: &EtcdServer, n: u64) {
    let before = member.answered("Txn");
    proxy.release();
    // Server-side counts have no event: polled.
    let answered = async {
        while member.answered("Txn") < before + n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), answered)
        .await
        .expect("the stranded put never reached etcd");
}

/// The key of `keys` is free at once for `kind`, and etcd holds nothing of it.
async fn left_free(member: &EtcdServer, direct: &Locker, keys: &StoredKeys, kind: LockKind) {
    let guard = direct
        .lock_of(keys.user(), kind)
        .wait(Duration::ZERO)
        .await
        .unwrap_or_else(|err| panic!("a late put holds {kind:?}: {err}"));
    guard.release().await.unwrap();
    let left: Vec<_> = etcd_keys(member)
        .await
        .into_iter()
        .filter(|key| key.contains(keys.user()))
        .collect();
    assert!(left.is_empty(), "a late put left {left:?}");
}

/// A put held back in the network (here a proxy; in the fault campaign, a
/// frozen member) can reach etcd after the acquire that sent it gave up,
/// and after the release that undid it. It must take nothing: an entry put
/// then would stand under the Locker's lease, kept alive by its other locks,
/// held by nobody. Each ask is refused by the mark its release wrote.
/// (A striped lock reads before it puts, so a proxy cannot strand its put
/// alone; the campaign covers it.)
#[tokio::test]
async fn a_put_that_lands_after_its_acquire_gave_up_takes_nothing() {
    let member = EtcdServer::start();
    let (proxy, backend, direct) = through_a_proxy(&member).await;
    let kinds = [
        LockKind::Exclusive,
        LockKind::Fair,
        LockKind::Read,
        LockKind::Write,
        LockKind::Permit { of: 2 },
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        // Dropped mid-send, then undone by its owner.
        let (keys, owner) = (
            StoredKeys::new("lock", &format!("late:{i}")).unwrap(),
            "cancelled",
        );
        strand_an_ask(&proxy, &backend, &keys, kind, owner, false).await;
        assert!(!retried(|| backend.release(&keys, kind, owner)).await);
        lands_late(&proxy, &member, 1).await;
        left_free(&member, &direct, &keys, kind).await;
        // Unanswered, asked again by the same owner, then held and released.
        let (keys, owner) = (
            StoredKeys::new("lock", &format!("retried:{i}")).unwrap(),
            "retried",
        );
        let stranded = strand_an_ask(&proxy, &backend, &keys, kind, owner, true).await;
        assert!(
            stranded.unwrap().is_err(),
            "{kind:?}: answered on a cut connection"
        );
        let asked = retried(|| backend.acquire(&keys, kind, owner, LEASE)).await;
        let Attempt::Acquired(_) = asked else {
            panic!("{kind:?}: a free key refused")
        };
        assert!(backend.release(&keys, kind, owner).await.unwrap());
        lands_late(&proxy, &member, 1).await;
        left_free(&member, &direct, &keys, kind).await;
    }
}

/// A waiter's next ask, held back past the release of its queue entry,
/// does not put the entry back.
#[tokio::test]
async fn a_waiters_ask_that_lands_after_its_release_puts_nothing_back() {
    let member = EtcdServer::start();
    let (proxy, backend, direct) = through_a_proxy(&member).await;
    for kind in [LockKind::Exclusive, LockKind::Fair, LockKind::Write] {
        let keys = StoredKeys::new("lock", &format!("queued:{kind:?}")).unwrap();
        let held = direct.lock_of(keys.user(), kind).await.unwrap();
        let asked = retried(|| backend.acquire(&keys, kind, "waiter", LEASE)).await;
        let Attempt::Queued { .. } = asked else {
            panic!("{kind:?}: not queued behind a holder")
        };
        held.release().await.unwrap();
        strand_an_ask(&proxy, &backend, &keys, kind, "waiter", false).await;
        retried(|| backend.release(&keys, kind, "waiter")).await;
        lands_late(&proxy, &member, 1).await;
        left_free(&member, &direct, &keys, kind).await;
    }
}

/// An undo of an unanswered put is itself a request that can land late:
/// sent again and answered, the acquisition puts anew and holds, and the
/// first undo, landing after that, must not delete what it holds.
#[tokio::test]
async fn an_undo_that_lands_late_leaves_the_next_put_alone() {
    let member = EtcdServer::start();
    let (proxy, backend, direct) = through_a_proxy(&member).await;
    for kind in [LockKind::Exclusive, LockKind::Read] {
        let keys = StoredKeys::new("lock", &format!("undone:{kind:?}")).unwrap();
        let owner = "twice";
        let stranded = strand_an_ask(&proxy, &backend, &keys, kind, owner, true).await;
        assert!(
            stranded.unwrap().is_err(),
            "{kind:?}: answered on a cut connection"
        );
        // The next ask first retires the unanswered put: stranded too.
        let gone = format!("{}:gone/", keys.base());
        let ask = retried(|| backend.acquire(&keys, kind, owner, LEASE));
        let asked = strand(&proxy, ask, &gone, false).await;
        assert!(asked.is_none());
        let Attempt::Acquired(_) = retried(|| backend.acquire(&keys, kind, owner, LEASE)).await
        else {
            panic!("{kind:?}: a free key refused")
        };
        // The stranded put and the stranded retire.
        lands_late(&proxy, &member, 2).await;
        let renewed = retried(|| backend.renew(&keys, kind, owner, LEASE)).await;
        assert!(
            renewed,
            "{kind:?}: a late undo deleted the lock its acquisition holds"
        );
        assert!(retried(|| backend.release(&keys, kind, owner)).await);
        left_free(&member, &direct, &keys, kind).await;
    }
}
