//! Behaviour every store must show, run once per `TestStore`.

use std::future::IntoFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{FencingToken, LockError, LockRequest, Locker};
use lock_testkit::{TestStore, assert_lost};
use tokio::time::Instant;

mod election;
mod fair;
mod inspect;
mod multi;
mod rw;
mod semaphore;
mod striped;
pub use election::*;
pub use fair::*;
pub use inspect::*;
pub use multi::*;
pub use rw::*;
pub use semaphore::*;
pub use striped::*;

/// Generous slack on top of a contractual time bound (CI machines stall).
pub(crate) const SLACK: Duration = Duration::from_millis(750);

/// The kinds of lock that admit one holder at a time: each keeps the
/// plain lock's contract, so the scenarios below run on all of them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sole {
    Plain,
    Fair,
    Write,
    /// Not one of them: a reader, for tests that put readers beside them.
    Read,
}

impl Sole {
    /// The kinds `store` keeps.
    pub(crate) fn on(store: &TestStore) -> Vec<Sole> {
        match store.keeps_the_family() {
            true => vec![Sole::Plain, Sole::Fair, Sole::Write],
            false => vec![Sole::Plain],
        }
    }

    /// A request for this kind of lock on `key`.
    pub(crate) fn request(self, locker: &Locker, key: impl AsRef<str>) -> LockRequest {
        match self {
            Sole::Plain => locker.lock(key),
            Sole::Fair => locker.fair_lock(key),
            Sole::Write => locker.write_lock(key),
            Sole::Read => locker.read_lock(key),
        }
    }

    /// Whether it admits one holder at a time.
    pub(crate) fn is_sole(self) -> bool {
        !matches!(self, Sole::Read)
    }
}

pub async fn exclusion_between_tasks_and_lockers(store: TestStore) {
    for kind in Sole::on(&store) {
        exclusion_of(&store, kind).await;
    }
}

async fn exclusion_of(store: &TestStore, kind: Sole) {
    const KEYS: usize = 3;
    const ROUNDS: u64 = 40;
    let lockers = [store.locker().await, store.locker().await];
    let inside: Arc<Vec<AtomicBool>> =
        Arc::new((0..KEYS).map(|_| AtomicBool::new(false)).collect());
    // Counters updated by a non-atomic read-modify-write: only exact under exclusion.
    let counters: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for worker in 0..8usize {
        let locker = lockers[worker % 2].clone();
        let (inside, counters, violations) = (inside.clone(), counters.clone(), violations.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                let k = (worker + round as usize) % KEYS;
                let guard = kind
                    .request(&locker, format!("counter:{k}"))
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("acquire");
                if inside[k].swap(true, Ordering::SeqCst) {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                let seen = counters[k].load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                counters[k].store(seen + 1, Ordering::SeqCst);
                inside[k].store(false, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "two holders of a {kind:?} lock inside at once"
    );
    let total: u64 = counters.iter().map(|c| c.load(Ordering::SeqCst)).sum();
    assert_eq!(total, 8 * ROUNDS, "lost updates under a {kind:?} lock");
}

pub async fn tokens_strictly_increase(store: TestStore) {
    let a = store.locker().await;
    let b = store.locker().await;
    let mut last = FencingToken::new(0);
    for i in 0..20 {
        let locker = if i % 2 == 0 { &a } else { &b };
        let guard = locker.lock("tokens").await.unwrap();
        assert!(guard.token() > last, "{} after {}", guard.token(), last);
        last = guard.token();
        guard.release().await.unwrap();
    }
    // Also after a lease ran out instead of being released (a short one,
    // unrenewed: its end is what is tested here).
    let (short, _) = store
        .locker_with(|l| l.ttl(Duration::from_millis(200)).watchdog(false))
        .await;
    let expiring = short.lock("tokens").await.unwrap();
    let first = expiring.token();
    let _ = expiring.lost().await;
    let next = a.lock("tokens").await.unwrap();
    assert!(next.token() > first);
    // Other keys have their own lines of tokens, never reused.
    let other = a.lock("tokens:other").await.unwrap();
    assert_ne!(other.token(), next.token());
    next.release().await.unwrap();
    // One line per key across every kind of lock, taken back to back (and
    // some side by side) from two Lockers (both renewing: the leases kept
    // must outlive a slow round trip on a loaded machine).
    let c = store.locker().await;
    let mut last = FencingToken::new(0);
    let mut kept = Vec::new();
    for round in 0..3 {
        let locker = if round % 2 == 0 { &a } else { &c };
        let requests = match store.keeps_the_family() {
            true => vec![
                locker.lock("tokens"),
                locker.fair_lock("tokens"),
                locker.semaphore("tokens", 2),
                locker.read_lock("tokens"),
                locker.striped("tokens", 2),
                locker.write_lock("tokens"),
            ],
            false => vec![locker.lock("tokens")],
        };
        for (i, request) in requests.into_iter().enumerate() {
            let guard = request.await.unwrap();
            assert!(
                guard.token() > last,
                "kind {i}: {} after {last}",
                guard.token()
            );
            last = guard.token();
            if i % 2 == 0 {
                kept.push(guard);
            } else {
                guard.release().await.unwrap();
            }
        }
        for guard in kept.drain(..) {
            guard.release().await.unwrap();
        }
    }
}

/// A waiter granted after another kind's lock on the key was taken gets a
/// later token, however early it queued (etcd and ZooKeeper queue it with
/// an entry made before that lock).
pub async fn tokens_rise_in_grant_order_across_kinds(store: TestStore) {
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l).await;
    let writer = store.locker().await;
    let held = holder.lock("granted").await.unwrap();
    let waiting =
        tokio::spawn(async move { waiter.lock("granted").wait(Duration::from_secs(20)).await });
    // Refused twice (before and after subscribing): it waits in line.
    counts.acquires_reach(2).await;
    let write = writer.write_lock("granted").await.unwrap();
    let written = write.token();
    write.release().await.unwrap();
    held.release().await.unwrap();
    let granted = waiting.await.unwrap().unwrap();
    assert!(
        granted.token() > written,
        "granted {} after {written} was minted",
        granted.token()
    );
    granted.release().await.unwrap();
}

pub async fn watchdog_keeps_a_short_lease(store: TestStore) {
    let (holder, renewals) = store.locker_with(|l| l.ttl(Duration::from_secs(1))).await;
    let other = store.locker().await;
    // Every kind at once: their leases are renewed side by side.
    let mut guards = Vec::new();
    let kinds = Sole::on(&store);
    for &kind in &kinds {
        guards.push(kind.request(&holder, "kept").await.unwrap());
    }
    let started = Instant::now();
    // Another owner waits 5 lease lengths in vain, for each kind.
    let waits = kinds
        .iter()
        .map(|kind| kind.request(&other, "kept").wait(Duration::from_secs(5)));
    for err in futures_util::future::join_all(waits.map(IntoFuture::into_future)).await {
        let err = err.unwrap_err();
        assert!(matches!(err, LockError::WaitTimeout { .. }), "{err}");
    }
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert!(guards.iter().all(|g| g.is_held()));
    // 15 renewals per lease in 5 s at 1/3 s.
    assert!(
        renewals.renewals() >= 10 * guards.len() as u64,
        "{} renewals",
        renewals.renewals()
    );
    for (kind, guard) in kinds.into_iter().zip(guards) {
        guard.release().await.unwrap();
        let request = kind.request(&other, "kept").wait(Duration::from_secs(1));
        request.await.unwrap().release().await.unwrap();
    }
}

pub async fn without_watchdog_the_lease_expires(store: TestStore) {
    let ttl = Duration::from_millis(500);
    let holder = store.locker().await;
    let other = store.locker().await;
    let acquired = Instant::now();
    let guard = holder
        .lock("expiring")
        .ttl(ttl)
        .watchdog(false)
        .await
        .unwrap();
    let lost = guard.lost().await;
    assert!(matches!(lost, LockError::Lost { .. }), "{lost}");
    let after = acquired.elapsed();
    assert!(after <= ttl + SLACK, "loss told after {after:?}");
    assert!(!guard.is_held());
    let next = other.lock("expiring").wait(ttl + SLACK).await.unwrap();
    assert!(next.token() > guard.token());
    assert_lost(guard.release().await);
    // The release of the expired lease did not remove the new owner's lock.
    assert!(other.try_lock("expiring").await.unwrap().is_none());
    assert!(next.is_held());
    next.release().await.unwrap();
}

/// A lock whose watchdog is off ends at its ttl even while the Locker
/// renews another lock (on etcd and ZooKeeper the two share a lease,
/// which the renewals keep alive).
pub async fn an_unrenewed_lock_ends_at_its_ttl_beside_a_renewed_one(store: TestStore) {
    let ttl = Duration::from_secs(1);
    let (holder, _) = store.locker_with(|l| l.ttl(ttl)).await;
    let (other, _) = store.locker_with(|l| l.ttl(ttl)).await;
    let kept = holder.lock("kept").await.unwrap();
    let unrenewed = holder.lock("unrenewed").watchdog(false).await.unwrap();
    let acquired = Instant::now();
    let next = other
        .lock("unrenewed")
        .wait(Duration::from_secs(5))
        .await
        .expect("the unrenewed lock outlived its ttl");
    let after = acquired.elapsed();
    assert!(
        after >= ttl - Duration::from_millis(50),
        "taken after {after:?}"
    );
    assert!(after <= ttl + SLACK, "taken after {after:?}");
    assert!(next.token() > unrenewed.token());
    assert!(kept.is_held());
    assert!(!unrenewed.is_held());
    next.release().await.unwrap();
    kept.release().await.unwrap();
}

pub async fn renewals_stop_on_release_and_drop(store: TestStore) {
    let ttl = Duration::from_secs(1);
    let (locker, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let released = locker.lock("renewed:1").await.unwrap();
    let dropped = locker.lock("renewed:2").await.unwrap();
    // Watch renewals happen (about three a ttl for each lease).
    tokio::time::timeout(4 * ttl, counts.renewals_reach(4))
        .await
        .expect("the watchdog renewed neither lease");
    released.release().await.unwrap();
    drop(dropped);
    let after = counts.renewals();
    // Three renewal intervals with no guard alive: no renewal may run.
    tokio::time::sleep(ttl).await;
    assert_eq!(counts.renewals(), after, "renewal after release or drop");
    assert_eq!(counts.releases(), 2);
    // The dropped guard's background release freed the lock.
    let again = locker
        .lock("renewed:2")
        .wait(Duration::from_secs(2))
        .await
        .unwrap();
    again.release().await.unwrap();
}

pub async fn loss_is_told_when_the_lease_is_taken(store: TestStore) {
    for kind in Sole::on(&store) {
        loss_of(&store, kind).await;
    }
    if !store.keeps_the_family() {
        return;
    }
    // The kinds that share a key are told too.
    let holder = store
        .locker_with(|l| l.ttl(Duration::from_millis(600)))
        .await
        .0;
    let shares = [
        holder.read_lock("shared").await.unwrap(),
        holder.semaphore("shared", 2).await.unwrap(),
        holder.striped("shared", 2).await.unwrap(),
    ];
    store.steal(&holder, "shared").await;
    for guard in shares {
        let told = tokio::time::timeout(Duration::from_millis(200) + SLACK, guard.lost()).await;
        assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
    }
}

async fn loss_of(store: &TestStore, kind: Sole) {
    let ttl = Duration::from_millis(600);
    let interval = ttl / 3;
    let (holder, _) = store.locker_with(|l| l.ttl(ttl)).await;
    let other = store.locker().await;
    let guard = kind.request(&holder, "taken").await.unwrap();
    let lost = guard.lost();
    store.steal(&holder, "taken").await;
    let stolen_at = Instant::now();
    let newer = kind
        .request(&other, "taken")
        .wait(Duration::from_secs(1))
        .await
        .unwrap();
    let err = tokio::time::timeout(interval + SLACK, lost)
        .await
        .unwrap_or_else(|_| panic!("the loss of a {kind:?} lock was not told"));
    let told_after = stolen_at.elapsed();
    assert!(
        told_after <= interval + SLACK,
        "loss told {told_after:?} after the theft"
    );
    match err {
        LockError::Lost { key, token, .. } => {
            assert_eq!(key, "taken");
            assert_eq!(token, guard.token());
        }
        other => panic!("{other}"),
    }
    assert!(!guard.is_held());
    assert_lost(guard.release().await);
    // The new owner's lock is untouched.
    let again = kind.request(&holder, "taken").wait(Duration::ZERO).await;
    assert!(
        again.is_err(),
        "the lost holder's release freed a {kind:?} lock"
    );
    newer.release().await.unwrap();
}

pub async fn waiters_wake_on_release(store: TestStore) {
    let holder = store.locker().await;
    let (waiter, attempts) = store.locker_with(|l| l).await;
    let mut handoffs = Vec::new();
    for _ in 0..20 {
        let guard = holder.lock("handoff").await.unwrap();
        let before = attempts.acquires();
        let w = waiter.clone();
        let task = tokio::spawn(async move {
            let g = w
                .lock("handoff")
                .wait(Duration::from_secs(20))
                .await
                .unwrap();
            let got = Instant::now();
            g.release().await.unwrap();
            got
        });
        // Two refused attempts (before and after subscribing): the waiter now
        // sleeps on the release channel, with 30 s left on the lease.
        attempts.acquires_reach(before + 2).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(10), task).await;
        let got = woken
            .expect("no handoff within 10 s of the release")
            .unwrap();
        handoffs.push(got.saturating_duration_since(released));
    }
    handoffs.sort();
    let p50 = handoffs[handoffs.len() / 2];
    let max = *handoffs.last().unwrap();
    println!("release-to-next-holder handoff: p50 {p50:?}, max {max:?}");
    // Far below the 30 s lease: the wake-up came from the release.
    assert!(max < Duration::from_secs(5), "handoff took {max:?}");
}

/// A holder whose process ends right after its release (its runtime shut
/// down at once, as at exit): the release itself wakes the waiter of
/// another process, not the end of the 30 s lease.
pub async fn a_release_right_before_exit_wakes_waiters(store: TestStore) {
    let store = Arc::new(store);
    let (waiter, attempts) = store.locker_with(|l| l).await;
    let (held, holding) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let holder = {
        let store = Arc::clone(&store);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("a runtime");
            let at = runtime.block_on(async {
                let locker = store.locker().await;
                let guard = locker.lock("exiting").await.unwrap();
                held.send(()).unwrap();
                released.await.unwrap();
                guard.release().await.unwrap();
                Instant::now()
            });
            // What the process left running ends here, as at its exit.
            runtime.shutdown_background();
            at
        })
    };
    holding.await.unwrap();
    let before = attempts.acquires();
    let task = tokio::spawn(async move {
        let guard = waiter.lock("exiting").wait(Duration::from_secs(20)).await;
        let got = Instant::now();
        guard.unwrap().release().await.unwrap();
        got
    });
    // Two refused attempts: the waiter sleeps, with 30 s left on the lease.
    attempts.acquires_reach(before + 2).await;
    release.send(()).unwrap();
    let released_at = tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("no handoff within 10 s of the release")
        .unwrap();
    let handoff = got.saturating_duration_since(released_at);
    assert!(handoff < Duration::from_secs(5), "handoff took {handoff:?}");
}

pub async fn wait_timeout_names_the_key(store: TestStore) {
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l).await;
    let _guard = holder.lock("orders/7").await.unwrap();
    let started = Instant::now();
    let err = waiter
        .lock("orders/7")
        .wait(Duration::from_millis(300))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_millis(300) + SLACK);
    assert!(matches!(err, LockError::WaitTimeout { ref key, .. } if key == "orders/7"));
    assert!(err.to_string().contains("`orders/7`"), "{err}");
    // A waiter with a queue entry in the store (etcd, ZooKeeper) withdrew it
    // before the error came back, so the next to ask is not behind it.
    let tickets = u64::from(store.plain_locks_queue());
    assert_eq!(counts.releases(), tickets, "ticket not withdrawn in time");
}

pub async fn a_vanished_holder_ends_at_its_ttl(store: TestStore) {
    let ttl = Duration::from_millis(600);
    let holder = store.locker().await;
    let waiter = store.locker().await;
    // A holder that vanishes without releasing (no release message).
    let sent = Instant::now();
    let guard = holder
        .lock("vanished")
        .ttl(ttl)
        .watchdog(false)
        .await
        .unwrap();
    let acquired = Instant::now();
    std::mem::forget(guard);
    let next = waiter
        .lock("vanished")
        .wait(Duration::from_secs(10))
        .await
        .unwrap();
    // The lease began at the store between the request's send and its
    // reply (a loaded machine may take a while to read the reply).
    let since_sent = sent.elapsed();
    assert!(
        since_sent >= ttl - Duration::from_millis(50),
        "taken early: {since_sent:?} after the holder's request was sent"
    );
    let after = acquired.elapsed();
    assert!(after <= ttl + SLACK, "waited {after:?} for a {ttl:?} lease");
    next.release().await.unwrap();
}

pub async fn cancellation_leaves_no_lock(store: TestStore) {
    // Long enough that no check below can pass by plain expiry.
    let ttl = Duration::from_secs(6);
    let (locker, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let kinds = Sole::on(&store);
    let mut tasks = Vec::new();
    for i in 0..96u64 {
        let (locker, kinds) = (locker.clone(), kinds.clone());
        tasks.push(tokio::spawn(async move {
            let key = format!("cancel:{}", i % 4);
            // Every kind, given up at varying points: while queued (a fair
            // lock's queue entry, a writer's mark), while at the store, or right
            // after acquiring.
            let kind = kinds[(i / 4) as usize % kinds.len()];
            let budget = Duration::from_micros(50 + (i * 997) % 3000);
            let request = kind.request(&locker, key).wait(Duration::from_secs(5));
            match tokio::time::timeout(budget, request).await {
                Ok(Ok(guard)) if i % 2 == 0 => drop(guard),
                Ok(Ok(guard)) => {
                    // Held while the task may be aborted: dropped by the abort.
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    drop(guard);
                }
                _ => {}
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        if i % 3 == 0 {
            task.abort();
        }
        let _ = task.await;
    }
    // Long before the ttl, every key is free and nothing renews.
    let other = store.locker().await;
    for k in 0..4 {
        for kind in Sole::on(&store) {
            let guard = kind
                .request(&other, format!("cancel:{k}"))
                .wait(ttl / 3)
                .await
                .unwrap_or_else(|err| panic!("a cancelled {kind:?} acquire left a lock: {err}"));
            guard.release().await.unwrap();
        }
    }
    nothing_left_after(&store, &locker, &counts, ttl).await;
}

/// After a storm of given-up acquires of leases of `ttl` on `locker`:
/// nothing renews past the first renewal a leftover lease would have had,
/// no local line is open, and no stored key is left.
pub(crate) async fn nothing_left_after(
    store: &TestStore,
    locker: &lock_core::Locker,
    counts: &lock_testkit::Counting,
    ttl: Duration,
) {
    let renewals = counts.renewals();
    tokio::time::sleep(ttl / 3 + SLACK).await;
    assert_eq!(
        counts.renewals(),
        renewals,
        "renewals after every lease is gone"
    );
    assert_eq!(locker.local_queues(), 0, "local lines left behind");
    store_is_empty(store).await;
}

/// No stored key is left (on a store with a server to ask).
pub(crate) async fn store_is_empty(store: &TestStore) {
    store.assert_nothing_left().await;
}

pub async fn bad_keys_are_refused_and_odd_keys_work(store: TestStore) {
    let locker = store.locker().await;
    let other = store.locker().await;
    let longest = "k".repeat(lock_core::MAX_KEY_LEN);
    locker
        .lock(&longest)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let bad_keys = [
        String::new(),
        "k".repeat(lock_core::MAX_KEY_LEN + 1),
        "k".repeat(1 << 20),
    ];
    let kinds = Sole::on(&store);
    for (bad, kind) in bad_keys
        .iter()
        .flat_map(|bad| kinds.iter().map(move |&kind| (bad, kind)))
    {
        match kind.request(&locker, bad).await {
            Err(LockError::InvalidKey { key, reason }) => {
                assert!(key.len() < 200, "the message repeats a huge key");
                assert!(!reason.is_empty());
            }
            other => panic!(
                "expected InvalidKey for a {}-byte key of a {kind:?} lock, got {other:?}",
                bad.len()
            ),
        }
    }
    let odd = [
        "a{b}",
        "{",
        "}",
        "*",
        "?x",
        "[ab]",
        "back\\slash",
        "crlf\r\n",
        "nul\0",
        "%7B",
        "ключ",
    ];
    let mut held = Vec::new();
    let pairs = odd
        .iter()
        .flat_map(|key| kinds.iter().map(move |&kind| (key, kind)));
    for (key, kind) in pairs {
        let guard = kind.request(&locker, key).await.unwrap();
        let again = kind.request(&other, key).wait(Duration::ZERO).await;
        assert!(again.is_err(), "{key:?} not exclusive as a {kind:?} lock");
        held.push(guard);
    }
    for guard in held.drain(..) {
        guard.release().await.unwrap();
    }
    if !store.keeps_the_family() {
        return;
    }
    // The shared kinds, with room for one holder, exclude the same way.
    let single: [fn(&Locker, &str) -> LockRequest; 3] = [
        |l, k| l.semaphore(k, 1),
        |l, k| l.striped(k, 1),
        |l, k| l.read_lock(k),
    ];
    for (key, request) in odd.iter().flat_map(|key| single.map(|r| (key, r))) {
        held.push(request(&locker, key).await.unwrap());
    }
    for key in odd {
        for request in &single[..2] {
            let again = request(&other, key).wait(Duration::ZERO).await;
            assert!(again.is_err(), "{key:?}: a second holder of one permit");
        }
        // Readers hold it: a writer waits.
        let write = other.write_lock(key).wait(Duration::ZERO).await;
        assert!(write.is_err(), "{key:?}: a writer beside a reader");
    }
    // Distinct inputs are distinct locks, under distinct stored names.
    let names: std::collections::HashSet<String> = odd
        .iter()
        .map(|key| locker.stored_keys(key).unwrap().lease().to_owned())
        .collect();
    assert_eq!(names.len(), odd.len(), "{names:?}");
    for guard in held {
        guard.release().await.unwrap();
    }
}

pub async fn reentrancy_is_task_scoped(store: TestStore) {
    let locker = store.locker().await;
    let guard = locker.lock("reentrant").await.unwrap();
    assert_eq!(FencingToken::current(), None);
    let token = guard.token();
    guard
        .scope(async {
            assert_eq!(FencingToken::current(), Some(token));
            let nested = locker.lock("reentrant").await.unwrap();
            assert!(nested.is_reentrant());
            assert_eq!(nested.token(), token);
            nested.release().await.unwrap();
            // Still held after the nested release.
            assert!(locker.try_lock("other-key").await.unwrap().is_some());
            let inner = locker.lock("inner").await.unwrap();
            inner
                .scope(async {
                    assert_eq!(FencingToken::current(), Some(inner.token()));
                })
                .await;
            // Another task is another holder.
            let l = locker.clone();
            let blocked =
                tokio::spawn(async move { l.try_lock("reentrant").await.unwrap().is_none() });
            assert!(blocked.await.unwrap());
        })
        .await;
    assert!(guard.is_held());
    guard.release().await.unwrap();
    assert!(locker.try_lock("reentrant").await.unwrap().is_some());
}

pub async fn try_lock_does_not_wait(store: TestStore) {
    let locker = store.locker().await;
    let other = store.locker().await;
    let guard = locker.try_lock("once").await.unwrap().expect("free");
    let started = Instant::now();
    assert!(other.try_lock("once").await.unwrap().is_none());
    assert!(
        locker.try_lock("once").await.unwrap().is_none(),
        "same locker, other task line"
    );
    assert!(started.elapsed() < SLACK);
    guard.release().await.unwrap();
    assert!(other.try_lock("once").await.unwrap().is_some());
}

/// `if_held_skip` never waits: a held lock is `Ok(None)` at once, for the
/// plain lock and (where the store keeps them) a write lock behind a
/// reader; a free one is taken, and nothing is left behind.
pub async fn if_held_skip_never_waits(store: TestStore) {
    let (locker, _) = store.locker_with(|l| l.wait(Duration::from_secs(20))).await;
    let other = store.locker().await;
    let held = other.lock("job:nightly").await.unwrap();
    let started = Instant::now();
    let skipped = locker.lock("job:nightly").if_held_skip().await.unwrap();
    assert!(skipped.is_none(), "taken beside its holder");
    if store.keeps_the_family() {
        let reader = other.read_lock("job:nightly").await.unwrap();
        let writer = locker.write_lock("job:nightly").if_held_skip().await;
        assert!(writer.unwrap().is_none(), "a writer beside a reader");
        reader.release().await.unwrap();
    }
    // Not the 20 s wait: one try each.
    assert!(started.elapsed() < SLACK * 4, "{:?}", started.elapsed());
    held.release().await.unwrap();
    let run = locker.lock("job:nightly").if_held_skip().await.unwrap();
    run.expect("free: taken").release().await.unwrap();
    assert_eq!(locker.local_queues(), 0, "local lines left behind");
    store_is_empty(&store).await;
}

/// A lease taken with `hold_at_least` and released (or dropped) sooner
/// stays held until then, renewed, and is given back at that time, not at
/// its ttl.
pub async fn hold_at_least_keeps_the_lock_after_an_early_release(store: TestStore) {
    let hold = Duration::from_secs(3);
    // A lease shorter than the hold (one a loaded machine still renews in
    // time): kept past it only by its renewals.
    let (locker, _) = store.locker_with(|l| l.ttl(Duration::from_secs(1))).await;
    let other = store.locker().await;
    // A hold the lease cannot last, and one on a multi-lock, are refused.
    let unrenewed = locker.lock("job:held").watchdog(false).hold_at_least(hold);
    let err = unrenewed.await.unwrap_err();
    assert!(matches!(err, LockError::InvalidConfig { .. }), "{err}");
    let keys = ["job:a", "job:b"];
    let options = lock_core::LockOptions::new().hold_at_least(hold);
    let err = locker.lock_all(keys).options(options).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidConfig { .. }), "{err}");
    for dropped in [false, true] {
        let started = Instant::now();
        let job = locker.lock("job:held").hold_at_least(hold).await.unwrap();
        match dropped {
            true => drop(job),
            false => job.release().await.unwrap(),
        }
        let skipped = other.lock("job:held").if_held_skip().await.unwrap();
        assert!(skipped.is_none(), "given back before hold_at_least");
        let next = other
            .lock("job:held")
            .wait(Duration::from_secs(30))
            .await
            .unwrap();
        let waited = started.elapsed();
        assert!(waited >= hold, "taken again after {waited:?}");
        // Given back at that time, not at the lease's end (its ttl).
        assert!(waited < hold + SLACK * 2, "taken again after {waited:?}");
        next.release().await.unwrap();
    }
    // The Locker that kept it holds no place either: it takes the key
    // again (a place left taken would time this out).
    let again = locker.lock("job:held").wait(Duration::from_secs(5)).await;
    again
        .expect("free on the keeping Locker")
        .release()
        .await
        .unwrap();
    assert_eq!(locker.local_queues(), 0, "local lines left behind");
    store_is_empty(&store).await;
}

pub async fn max_hold_stops_renewal(store: TestStore) {
    // Leases a loaded machine renews in time: the bound is what is tested.
    let ttl = Duration::from_secs(1);
    let max_hold = Duration::from_secs(2);
    let (locker, _) = store.locker_with(|l| l.ttl(ttl).max_hold(max_hold)).await;
    let started = Instant::now();
    let guard = locker.lock("bounded").await.unwrap();
    let lost = guard.lost().await;
    let after = started.elapsed();
    assert!(
        matches!(
            lost,
            LockError::Lost {
                reason: lock_core::LossReason::MaxHoldTimeReached,
                ..
            }
        ),
        "{lost}"
    );
    assert!(
        after >= max_hold && after <= max_hold + ttl + SLACK,
        "{after:?}"
    );
}

pub async fn waiters_per_key_are_bounded(store: TestStore) {
    let (locker, _) = store.locker_with(|l| l.max_waiters_per_key(2)).await;
    let held = locker.lock("crowded").await.unwrap();
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let l = locker.clone();
            tokio::spawn(async move {
                let guard = l.lock("crowded").wait(Duration::from_secs(20)).await?;
                guard.release().await
            })
        })
        .collect();
    while locker.local_waiters("crowded") < 2 {
        tokio::task::yield_now().await;
    }
    let err = locker.lock("crowded").await.unwrap_err();
    assert!(
        matches!(err, LockError::TooManyWaiters { limit: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("`crowded`"));
    held.release().await.unwrap();
    for waiter in waiters {
        waiter.await.unwrap().unwrap();
    }
}

pub async fn the_local_deadline_ends_before_the_store_does(store: TestStore) {
    let ttl = Duration::from_secs(1);
    let holder = store.locker().await;
    let other = store.locker().await;
    let guard = holder
        .lock("margin")
        .ttl(ttl)
        .watchdog(false)
        .await
        .unwrap();
    // The drift margin (1 % + 2 ms) is kept off the local deadline.
    let drift = ttl / 100 + Duration::from_millis(2);
    assert!(
        guard.expires_in() <= ttl - drift,
        "{:?}",
        guard.expires_in()
    );
    let next = other
        .lock("margin")
        .wait(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(
        !guard.is_held(),
        "the holder still believed it held when another owner got the lock"
    );
    next.release().await.unwrap();
}

pub async fn a_starved_watchdog_sends_no_renewal_after_the_deadline(store: TestStore) {
    // The first renewal falls due at ttl/3 (500 ms): the block starts long
    // before that.
    let ttl = Duration::from_millis(1500);
    let (locker, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    // The lease and its watchdog live on a runtime of their own, whose only
    // thread is then blocked past the deadline (as a runtime starved by
    // blocking code is).
    let lost = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let guard = locker.lock("starved").await.unwrap();
            std::thread::sleep(2 * ttl);
            let lost = tokio::time::timeout(SLACK, guard.lost()).await;
            drop(guard);
            lost.expect("the loss was not told after the block")
        })
    })
    .await
    .unwrap();
    assert!(matches!(lost, LockError::Lost { .. }), "{lost}");
    // Blocked before the first renewal fell due (ttl/3), resumed after the
    // deadline: not one renewal may have been sent.
    assert_eq!(
        counts.renewals(),
        0,
        "a renewal was sent after the deadline"
    );
}

pub async fn waiting_does_not_poll_during_a_long_hold(store: TestStore) {
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l).await;
    let guard = holder.lock("quiet").await.unwrap();
    let task =
        tokio::spawn(async move { waiter.lock("quiet").wait(Duration::from_secs(20)).await });
    // A try, then (once subscribed to releases) one more, so that no
    // release between the two is missed.
    counts.acquires_reach(2).await;
    // The hold is the point: with 30 s left on the lease, a waiter that
    // polled (every 100 ms without a release channel) would try about 15
    // times more.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(counts.acquires(), 2, "the waiter tried during the hold");
    guard.release().await.unwrap();
    let next = tokio::time::timeout(SLACK, task)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    assert_eq!(counts.acquires(), 3, "one try after the release");
    next.release().await.unwrap();
}
