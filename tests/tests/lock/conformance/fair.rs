//! The fair lock (`Locker::fair_lock`) on every backend.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_testkit::TestStore;
use tokio::time::Instant;

use super::SLACK;

/// Tasks line up in a known order, each once the one before is queued:
/// eight Lockers (as processes) with one ticket each at the store, then a
/// ninth Locker with one ticket and three tasks in its local line. Grants
/// follow that order. (The line's tasks come last: a task in a line asks
/// the store only when the one before it releases, so its place among
/// other processes' later tickets is a race, not a contract.)
pub async fn fair_grants_in_arrival_order(store: TestStore) {
    const LOCKERS: usize = 9;
    const TASKS: usize = 12;
    let holder = store.locker().await;
    let first = holder.fair_lock("fifo").await.unwrap();
    let mut lockers = Vec::new();
    for _ in 0..LOCKERS {
        lockers.push(store.locker_with(|l| l).await);
    }
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (locker, counts) = &lockers[i.min(LOCKERS - 1)];
        let (mine, order) = (locker.clone(), Arc::clone(&order));
        let (asked, waiting) = (counts.acquires(), locker.local_waiters("fifo"));
        tasks.push(tokio::spawn(async move {
            let guard = mine
                .fair_lock("fifo")
                .wait(Duration::from_secs(30))
                .await
                .unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        // Queued: the first task of a Locker asked the store, the others
        // joined its line.
        if i < LOCKERS {
            counts.acquires_reach(asked + 1).await;
        } else {
            while locker.local_waiters("fifo") == waiting {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    }
    first.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a fair waiter was never served")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        (0..TASKS).collect::<Vec<_>>(),
        "not granted in order"
    );
    super::store_is_empty(&store).await;
}

/// A cancelled waiter leaves the queue at once; a vanished one (its future
/// forgotten, as if its process died) delays it by at most its ticket's
/// lease, the ttl.
pub async fn fair_queue_survives_cancelled_and_vanished_waiters(store: TestStore) {
    let ttl = Duration::from_millis(1200);
    let holder = store.locker().await;
    let held = holder.fair_lock("line").ttl(ttl).await.unwrap();
    // A waiter that gives up: its ticket goes with it.
    let (quitter, counts) = store.locker_with(|l| l.ttl(Duration::from_secs(30))).await;
    let asked = counts.acquires();
    let quitting = tokio::spawn(async move { quitter.fair_lock("line").await });
    counts.acquires_reach(asked + 1).await;
    quitting.abort();
    let _ = quitting.await;
    // A waiter that vanishes: its ticket stays until its lease lapses.
    let (dead, counts) = store.locker_with(|l| l.ttl(ttl)).await;
    let asked = counts.acquires();
    let mut vanishing = Box::pin(
        dead.fair_lock("line")
            .wait(Duration::from_secs(60))
            .into_future(),
    );
    tokio::select! {
        _ = &mut vanishing => panic!("granted while held"),
        () = counts.acquires_reach(asked + 1) => {}
    }
    let queued_at = Instant::now();
    std::mem::forget(vanishing);
    // The next waiter, behind both.
    let (next, counts) = store.locker_with(|l| l).await;
    let asked = counts.acquires();
    let waiting =
        tokio::spawn(async move { next.fair_lock("line").wait(Duration::from_secs(30)).await });
    counts.acquires_reach(asked + 1).await;
    held.release().await.unwrap();
    let guard = tokio::time::timeout(ttl + SLACK * 2, waiting)
        .await
        .expect("a dead waiter blocked the queue past its lease")
        .unwrap()
        .unwrap();
    let after = queued_at.elapsed();
    // The dead waiter came first: it held the place until its ticket lapsed.
    assert!(
        after >= ttl - Duration::from_millis(100),
        "served after {after:?}"
    );
    assert!(after <= ttl + SLACK * 2, "served after {after:?}");
    guard.release().await.unwrap();
    super::store_is_empty(&store).await;
}
