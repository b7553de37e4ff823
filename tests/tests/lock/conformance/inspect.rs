//! Operators' calls: inspection, the keys held, force-release.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::LockKind;
use lock_core::{Holder, LockError, LockGuard, Locker, Unlisted, Waiters};
use lock_testkit::TestStore;

use super::{SLACK, Sole};

/// The one holder `guard` should be in `holders`, checked against it.
fn holder_of<'h>(holders: &'h [Holder], guard: &LockGuard, kind: LockKind) -> &'h Holder {
    let found: Vec<&Holder> = holders
        .iter()
        .filter(|h| h.token == guard.token())
        .collect();
    assert_eq!(found.len(), 1, "{holders:?}");
    let holder = found[0];
    assert_eq!(holder.kind, kind, "{holder:?}");
    let pid = std::process::id();
    assert_eq!(holder.process(), Some(format!("inspector-a/pid {pid}")));
    if let Some(remaining) = holder.remaining {
        assert!(remaining <= guard.ttl() + SLACK, "{holder:?}");
    }
    if let Some(age) = holder.age {
        assert!(age < Duration::from_secs(60), "{holder:?}");
    }
    holder
}

/// A plain lock's waiter, as the store tells of it: a queue entry where
/// every lock is a queue, the lease's waiter mark on Redis, PostgreSQL and
/// MySQL, else "not known"; never "no one waits" (`Unlisted::None` with 0
/// queued) once it waits.
async fn plain_waiters_are_never_shown_as_none(store: &TestStore, a: &Locker, b: &Locker) {
    let held = a.lock("seen:waited").await.unwrap();
    let quiet = b.inspect("seen:waited").await.unwrap().waiters;
    assert_eq!(quiet.queued, 0, "{quiet:?}");
    assert_ne!(
        quiet.unlisted,
        Unlisted::SomeoneWaited,
        "no one has waited yet"
    );
    let waiter = tokio::spawn({
        let b = b.clone();
        async move { b.lock("seen:waited").wait(Duration::from_secs(30)).await }
    });
    // Queued, unlisted, and the kinds listed.
    let expected = if store.plain_locks_queue() {
        (1, Unlisted::None, vec![LockKind::Exclusive])
    } else if store.marks_plain_waiters() {
        (0, Unlisted::SomeoneWaited, vec![])
    } else {
        (0, Unlisted::Unknown, vec![])
    };
    let shown = async {
        loop {
            let seen = b.inspect("seen:waited").await.unwrap().waiters;
            let kinds = seen.queue.iter().map(|w| w.kind).collect();
            if (seen.queued, seen.unlisted, kinds) == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let shown = tokio::time::timeout(Duration::from_secs(10), shown).await;
    shown.unwrap_or_else(|_| panic!("the waiter was never shown as {expected:?}"));
    held.release().await.unwrap();
    let next = waiter.await.unwrap().expect("the waiter gets the lock");
    next.release().await.unwrap();
}

/// Waits until the store keeps `n` queue entries for `key`: the waiters.
async fn until_queued(locker: &Locker, key: &str, n: usize) -> Waiters {
    let queued = async {
        loop {
            let seen = locker.inspect(key).await.unwrap().waiters;
            if seen.queued == n {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let waited = tokio::time::timeout(Duration::from_secs(10), queued).await;
    waited.unwrap_or_else(|_| panic!("{key} never had {n} waiters queued"))
}

/// A fair lock's waiters are listed in line, with their processes, and
/// granted in that order.
async fn fair_waiters_are_listed_in_line(store: &TestStore, a: &Locker) {
    let held = a.fair_lock("seen:line").await.unwrap();
    let mut waiting = Vec::new();
    for (n, label) in ["waiter-1", "waiter-2"].into_iter().enumerate() {
        let (locker, _) = store.locker_with(|b| b.label(label)).await;
        let task = tokio::spawn({
            let locker = locker.clone();
            async move {
                locker
                    .fair_lock("seen:line")
                    .wait(Duration::from_secs(30))
                    .await
            }
        });
        until_queued(a, "seen:line", n + 1).await;
        waiting.push((locker, task));
    }
    let seen = a.inspect("seen:line").await.unwrap().waiters;
    let pid = std::process::id();
    let line: Vec<_> = seen.queue.iter().map(|w| (w.kind, w.process())).collect();
    let process = |label: &str| Some(format!("{label}/pid {pid}"));
    let expected = [
        (LockKind::Fair, process("waiter-1")),
        (LockKind::Fair, process("waiter-2")),
    ];
    assert_eq!(line, expected, "{seen:?}");
    held.release().await.unwrap();
    for (_locker, task) in waiting {
        let granted = tokio::time::timeout(Duration::from_secs(10), task).await;
        let guard = granted.expect("granted in line").unwrap().unwrap();
        guard.release().await.unwrap();
    }
}

pub async fn inspection_shows_every_holder_and_force_release_frees_the_key(store: TestStore) {
    let (a, _) = store
        .locker_with(|b| b.label("inspector-a").ttl(Duration::from_secs(3)))
        .await;
    let b = store.locker().await;

    // A plain lock, and a waiter behind it where waiters leave queue entries.
    let plain = a.lock("seen:plain").await.unwrap();
    let seen = a.inspect("seen:plain").await.unwrap();
    assert_eq!(seen.key, "seen:plain");
    assert_eq!(seen.holders.len(), 1, "{seen:?}");
    holder_of(&seen.holders, &plain, LockKind::Exclusive);
    assert!(!b.inspect("seen:nothing").await.unwrap().is_held());
    plain_waiters_are_never_shown_as_none(&store, &a, &b).await;

    if store.keeps_the_family() {
        fair_waiters_are_listed_in_line(&store, &a).await;
        // A 30 s lease ahead: its waiter asks again on its own only after 15 s.
        let (a_long, _) = store.locker_with(|b| b.label("inspector-a")).await;
        let fair = a_long.fair_lock("seen:fair").await.unwrap();
        let queued = tokio::spawn({
            let b = b.clone();
            async move { b.fair_lock("seen:fair").wait(Duration::from_secs(30)).await }
        });
        let (r1, r2) = (
            a.read_lock("seen:rw").await.unwrap(),
            a.read_lock("seen:rw").await.unwrap(),
        );
        let permit = a.semaphore("seen:sem", 3).await.unwrap();
        let segment = a.striped("seen:striped", 4).await.unwrap();

        // The fair waiter's queue entry is in the store once it is queued.
        let waiting = async {
            loop {
                let seen = b.inspect("seen:fair").await.unwrap();
                if seen.waiters.queued == 1 {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let seen = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the fair waiter's ticket never showed");
        assert_eq!(seen.holders.len(), 1, "{seen:?}");
        holder_of(&seen.holders, &fair, LockKind::Fair);

        let seen = b.inspect("seen:rw").await.unwrap();
        assert_eq!(seen.holders.len(), 2, "{seen:?}");
        holder_of(&seen.holders, &r1, LockKind::Read);
        holder_of(&seen.holders, &r2, LockKind::Read);
        let seen = b.inspect("seen:sem").await.unwrap();
        holder_of(&seen.holders, &permit, LockKind::Permit { of: 3 });
        let seen = b.inspect("seen:striped").await.unwrap();
        let holder = holder_of(&seen.holders, &segment, LockKind::Segment { of: 4 });
        assert_eq!(holder.segment, segment.segment());

        let mut listed = b.held_keys("seen:*").await.unwrap();
        listed.sort();
        assert_eq!(
            listed,
            [
                "seen:fair",
                "seen:plain",
                "seen:rw",
                "seen:sem",
                "seen:striped"
            ]
        );
        assert_eq!(b.held_keys("seen:s*").await.unwrap().len(), 2);

        // Breaking the fair lock wakes its waiter (well before it would ask
        // again on its own, at half its 30 s queue entry), which gets the lock
        // with a higher token.
        assert!(b.force_release("seen:fair").await.unwrap().removed >= 1);
        let woken = tokio::time::timeout(Duration::from_secs(5), queued).await;
        let next = woken.expect("the waiter was not woken").unwrap();
        let next = next.expect("the waiter gets the lock");
        assert!(next.token() > fair.token());
        // (The old holder is told at its next renewal, as the plain lock's
        // below is: not waited for here, 10 s away.)
        drop(fair);
        next.release().await.unwrap();
        for guard in [r1, r2, permit, segment] {
            guard.release().await.unwrap();
        }
    } else {
        assert_eq!(b.held_keys("seen:*").await.unwrap(), ["seen:plain"]);
    }

    // Breaking the plain lock: the holder is told within a renewal, the
    // key is free, and the next holder's token is higher.
    let forced = b.force_release("seen:plain").await.unwrap();
    assert_eq!(forced.removed, 1);
    assert!(forced.tokens_up_to >= Some(plain.token()), "{forced:?}");
    let told = tokio::time::timeout(plain.ttl() / 3 + SLACK * 4, plain.lost()).await;
    assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
    assert!(!b.inspect("seen:plain").await.unwrap().is_held());
    let next = b.try_lock("seen:plain").await.unwrap().expect("free");
    assert!(Some(next.token()) > forced.tokens_up_to);
    next.release().await.unwrap();
    drop(plain);
    let nothing = b.force_release("seen:plain").await.unwrap();
    assert_eq!((nothing.removed, nothing.tokens_up_to), (0, None));
    store.assert_nothing_left().await;
}

/// A force-release of a key with waiters in line: what a woken waiter is
/// granted stays granted (its release succeeds), with a token above what
/// was removed, and one waiter holds at a time where the lock admits one.
/// Rounds cycle through the kinds that admit one holder and readers behind
/// a writer (woken all at once). ZooKeeper deleted a key's nodes one by
/// one: the first delete woke a waiter, granted on its node, which a later
/// delete took.
pub async fn force_release_keeps_what_it_grants(store: TestStore) {
    const ROUNDS: usize = 50;
    const WAITERS: usize = 6;
    let holder = store.locker().await;
    let operator = store.locker().await;
    let mut waiters = Vec::new();
    for _ in 0..WAITERS {
        waiters.push(store.locker_with(|b| b).await);
    }
    // Each round's holder and its waiters: the same kind, or readers
    // behind a writer.
    let mut rounds: Vec<(Sole, Option<Sole>)> = Sole::on(&store)
        .into_iter()
        .map(|kind| (kind, None))
        .collect();
    if store.keeps_the_family() {
        rounds.push((Sole::Write, Some(Sole::Read)));
    }
    for round in 0..ROUNDS {
        let (kind, waiting) = rounds[round % rounds.len()];
        let waiting = waiting.unwrap_or(kind);
        let key = format!("forced:{round}");
        let held = kind.request(&holder, &key).await.unwrap();
        let granted = Arc::new(Mutex::new(Vec::new()));
        let inside = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for (locker, counts) in &waiters {
            let before = counts.acquires();
            let request = waiting.request(locker, &key).wait(Duration::from_secs(30));
            let (granted, inside) = (Arc::clone(&granted), Arc::clone(&inside));
            let sole = waiting.is_sole();
            tasks.push(tokio::spawn(async move {
                let guard = request.await?;
                let overlapped = sole && inside.swap(true, Ordering::SeqCst);
                granted.lock().unwrap().push(guard.token());
                // Work long enough for a force-release still under way to
                // reach this grant.
                tokio::time::sleep(Duration::from_millis(10)).await;
                inside.store(false, Ordering::SeqCst);
                let released = guard.release().await;
                assert!(!overlapped, "two waiters held {waiting:?} at once");
                released
            }));
            // Refused twice (before and after subscribing): it waits in line.
            counts.acquires_reach(before + 2).await;
        }
        let forced = operator.force_release(&key).await.unwrap();
        assert!(forced.removed >= 1 && forced.tokens_up_to >= Some(held.token()));
        for task in tasks {
            let done = tokio::time::timeout(Duration::from_secs(60), task).await;
            let released = done.expect("a waiter was never granted").unwrap();
            assert!(
                released.is_ok(),
                "round {round} ({waiting:?} behind {kind:?}): a woken waiter lost what it was granted: {released:?}"
            );
        }
        let mut tokens = granted.lock().unwrap().clone();
        // Readers are granted side by side: in no set order.
        if !waiting.is_sole() {
            tokens.sort();
        }
        assert!(
            tokens.first().copied() > forced.tokens_up_to && tokens.windows(2).all(|w| w[0] < w[1]),
            "round {round} ({waiting:?} behind {kind:?}): tokens {tokens:?} after {forced:?}"
        );
        // Its lease is gone: the release in the background finds nothing.
        drop(held);
    }
    store.assert_nothing_left().await;
}
