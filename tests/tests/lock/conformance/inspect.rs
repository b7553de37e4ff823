//! Operators' calls: inspection, the keys held, force-release.

use std::time::Duration;

use lock_core::LockKind;
use lock_core::{Holder, LockError, LockGuard};
use lock_testkit::TestStore;

use super::SLACK;

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

    if store.keeps_the_family() {
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
                if seen.waiters == Some(1) {
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
        assert!(b.force_release("seen:fair").await.unwrap() >= 1);
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
    assert_eq!(b.force_release("seen:plain").await.unwrap(), 1);
    let told = tokio::time::timeout(plain.ttl() / 3 + SLACK * 4, plain.lost()).await;
    assert!(matches!(told, Ok(LockError::Lost { .. })), "{told:?}");
    assert!(!b.inspect("seen:plain").await.unwrap().is_held());
    let next = b.try_lock("seen:plain").await.unwrap().expect("free");
    assert!(next.token() > plain.token());
    next.release().await.unwrap();
    drop(plain);
    assert_eq!(b.force_release("seen:plain").await.unwrap(), 0);
    store.assert_nothing_left().await;
}
