//! The semaphore (`Locker::semaphore`) on every backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lock_core::LockError;
use lock_testkit::TestStore;

use super::SLACK;

/// Never more than `permits` holders across Lockers; every permit is used
/// at once; a freed permit goes to a waiter; tokens keep rising per key.
pub async fn semaphore_admits_its_permits_and_no_more(store: TestStore) {
    const PERMITS: u32 = 3;
    let (waiting_side, counts) = store.locker_with(|l| l).await;
    let lockers = [store.locker().await, waiting_side, store.locker().await];
    let plain = lockers[0].lock("pool").await.unwrap();
    let before = plain.token();
    plain.release().await.unwrap();
    let mut held = Vec::new();
    for locker in &lockers {
        held.push(locker.semaphore("pool", PERMITS).await.unwrap());
    }
    let tokens: Vec<_> = held.iter().map(|g| g.token()).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(
        tokens[0] > before,
        "a permit's token is not above the lock's"
    );
    // All in use, also for another task of a holding process.
    for locker in &lockers {
        let none = locker.try_semaphore("pool", PERMITS).await.unwrap();
        assert!(none.is_none(), "a fourth permit was granted");
    }
    let waiter = lockers[1].clone();
    let tried = counts.acquires();
    let waiting = tokio::spawn(async move {
        waiter
            .semaphore("pool", PERMITS)
            .wait(Duration::from_secs(10))
            .await
    });
    // Released once the waiter has found every permit held: it must be
    // woken, not find one free on its first try.
    tokio::time::timeout(SLACK * 4, counts.acquires_reach(tried + 1))
        .await
        .expect("the waiter never asked");
    held.remove(0).release().await.unwrap();
    let next = tokio::time::timeout(SLACK * 4, waiting)
        .await
        .expect("the freed permit was not handed on")
        .unwrap()
        .unwrap();
    assert!(next.token() > tokens[2]);
    next.release().await.unwrap();
    for guard in held {
        guard.release().await.unwrap();
    }
    super::store_is_empty(&store).await;
}

/// 9 tasks on 3 Lockers take a semaphore of 3 over and over: never more
/// than 3 inside at once.
pub async fn semaphore_bound_holds_under_contention(store: TestStore) {
    const PERMITS: u32 = 3;
    let inside = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for worker in 0..9 {
        let locker = store.locker().await;
        let (inside, most) = (inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                let permit = locker
                    .semaphore("busy", PERMITS)
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("a permit");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2 + worker % 3)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("stuck")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS, "{most} holders at once");
}

/// Numbers that disagree are named; bad numbers never reach the store; a
/// vanished holder's permit returns at its ttl; the watchdog keeps one.
pub async fn semaphore_permits_disagree_vanish_and_renew(store: TestStore) {
    let (locker, counts) = store.locker_with(|l| l).await;
    // Long enough that a stalled machine does not miss two renewals in a row.
    let kept = locker
        .semaphore("sized", 2)
        .ttl(Duration::from_millis(1500))
        .await
        .unwrap();
    let err = locker
        .semaphore("sized", 3)
        .wait(Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LockError::SizeDisagrees { key, what: "permits", asked: 3, stored: 2 } if key == "sized"),
        "{err}"
    );
    let before = counts.acquires();
    for bad in [0, 1025] {
        let err = locker.semaphore("sized", bad).await.unwrap_err();
        assert!(
            matches!(
                err,
                LockError::InvalidConfig {
                    what: "permits",
                    ..
                }
            ),
            "{err}"
        );
    }
    assert_eq!(counts.acquires(), before, "a bad number reached the store");
    // Renewed past two ttls, by its watchdog.
    tokio::time::sleep(Duration::from_millis(3300)).await;
    assert!(kept.is_held());
    let second = locker.semaphore("sized", 2).await.unwrap();
    assert!(locker.try_semaphore("sized", 2).await.unwrap().is_none());
    // A holder that vanishes (no release, no renewal) frees its permit at
    // its ttl.
    let ttl = Duration::from_millis(600);
    let other = store.locker().await;
    let vanished = other.semaphore("sized", 2).ttl(ttl).watchdog(false);
    drop(kept);
    let vanished = vanished.await.unwrap();
    std::mem::forget(vanished);
    let back = locker
        .semaphore("sized", 2)
        .wait(ttl + SLACK)
        .await
        .expect("the vanished holder's permit did not return");
    // Once nobody holds it, another number is taken.
    back.release().await.unwrap();
    second.release().await.unwrap();
    let resized = locker.semaphore("sized", 5).await.unwrap();
    resized.release().await.unwrap();
}

/// Waiters of one process for a semaphore line up locally: only the head
/// asks the store while all permits are held, and each freed permit goes to
/// the next task in line.
pub async fn semaphore_waiters_of_a_process_line_up(store: TestStore) {
    const WAITERS: usize = 50;
    let holder = store.locker().await;
    let held = holder.semaphore("herd", 1).await.unwrap();
    let (locker, counts) = store.locker_with(|l| l).await;
    let before = counts.acquires();
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let locker = locker.clone();
            tokio::spawn(async move {
                let permit = locker
                    .semaphore("herd", 1)
                    .wait(Duration::from_secs(30))
                    .await?;
                permit.release().await
            })
        })
        .collect();
    let queued = async {
        while locker.local_waiters("herd") < WAITERS - 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the waiters never lined up");
    let asked = counts.acquires() - before;
    assert!(asked <= 3, "{asked} store requests from one line's waiters");
    held.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a waiter was never served")
            .unwrap()
            .unwrap();
    }
    assert_eq!(locker.local_queues(), 0, "a queue was left behind");
}

/// Acquires of permits and segments given up at any point (queued locally, at the
/// store, right after the grant) and aborted holders leave no permit held,
/// nothing renewing, no local line and no stored key.
pub async fn semaphore_cancellation_leaves_no_permit(store: TestStore) {
    // Long enough that no check below can pass by plain expiry.
    let ttl = Duration::from_secs(6);
    let (locker, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let locker = locker.clone();
        tasks.push(tokio::spawn(async move {
            let key = format!("cancel-permits:{}", i % 4);
            let budget = Duration::from_micros(50 + (i * 997) % 3000);
            // Semaphores and striped locks alike.
            let request = if (i / 4) % 2 == 0 {
                locker.semaphore(key, 2)
            } else {
                locker.striped(key, 2)
            };
            let request = request.wait(Duration::from_secs(5));
            if let Ok(Ok(permit)) = tokio::time::timeout(budget, request).await {
                tokio::time::sleep(Duration::from_millis(i % 3)).await;
                drop(permit);
            }
        }));
    }
    for (i, task) in tasks.into_iter().enumerate() {
        if i % 3 == 0 {
            task.abort();
        }
        let _ = task.await;
    }
    // Long before the ttl, both permits of every key are free.
    let other = store.locker().await;
    for k in 0..4 {
        let key = format!("cancel-permits:{k}");
        let all = [
            other.semaphore(&key, 2).wait(ttl / 3).await,
            other.semaphore(&key, 2).wait(ttl / 3).await,
            other.striped(&key, 2).wait(ttl / 3).await,
            other.striped(&key, 2).wait(ttl / 3).await,
        ];
        for permit in all {
            let permit = permit.expect("a cancelled acquire left a permit or segment behind");
            permit.release().await.unwrap();
        }
    }
    super::nothing_left_after(&store, &locker, &counts, ttl).await;
}
