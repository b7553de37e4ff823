//! The fair lock (`Locker::fair_lock`) on every backend.

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{LockGuard, Locker};
use lock_testkit::{Process, TestStore};
use tokio::time::Instant;

use super::SLACK;

/// Fair requests are granted in the order they reached the store, whichever
/// Locker made them and whether or not their Locker holds the key: each
/// takes its own queue entry when it starts waiting. Each arrangement is the
/// holder's Locker and the Lockers of the requests, in the order they are
/// made (each once the one before is queued at the store).
pub async fn fair_grants_in_arrival_order(store: TestStore) {
    let interleaved: Vec<usize> = (0..12).map(|r| r % 3).collect();
    let arrangements: [(usize, &[usize]); 4] = [
        // Nine Lockers as processes, the last with four tasks.
        (0, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 9]),
        // The holder's Locker hosts waiters, before and after the others'.
        (0, &[0, 0, 1, 1, 2, 0]),
        (0, &[0, 1, 2, 0, 1, 2]),
        // 3 Lockers x 4 tasks, interleaved: the holder rotates.
        (1, &interleaved),
    ];
    for (round, (holder, requests)) in arrangements.into_iter().enumerate() {
        let key = format!("fifo:{round}");
        let order = granted(&store, &key, holder, requests, None).await;
        assert_eq!(
            order,
            (0..requests.len()).collect::<Vec<_>>(),
            "holder on Locker {holder}, requests from Lockers {requests:?}: not granted in order"
        );
    }
    super::store_is_empty(&store).await;
}

/// A waiter cancelled in the middle of the queue leaves it at once: the
/// ones behind it are served in order, long before its queue entry's lease
/// (30 s) would have run out.
pub async fn fair_skips_a_cancelled_waiter_in_the_middle(store: TestStore) {
    let order = granted(&store, "middle", 0, &[0, 1, 2, 0, 1], Some(2)).await;
    assert_eq!(
        order,
        [0, 1, 3, 4],
        "not granted in order around the cancelled one"
    );
    super::store_is_empty(&store).await;
}

/// Makes fair requests on `key` from the Lockers `requests` names while
/// Locker `holder` holds it, each once the one before is queued at the
/// store; cancels request `cancel` once all are; releases and returns the
/// requests in the order they were granted.
async fn granted(
    store: &TestStore,
    key: &str,
    holder: usize,
    requests: &[usize],
    cancel: Option<usize>,
) -> Vec<usize> {
    let count = requests.iter().copied().max().unwrap_or(0).max(holder) + 1;
    let mut lockers = Vec::new();
    for _ in 0..count {
        lockers.push(store.locker_with(|l| l).await);
    }
    let first = lockers[holder].0.fair_lock(key).await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (i, &at) in requests.iter().enumerate() {
        let (locker, counts) = &lockers[at];
        let asked = counts.acquires();
        let (mine, order, key) = (locker.clone(), Arc::clone(&order), key.to_owned());
        tasks.push(tokio::spawn(async move {
            let request = mine.fair_lock(&key).wait(Duration::from_secs(20));
            let guard = request.await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        }));
        // Its queue entry is in the store before the next request is made: it
        // asked, subscribed and asked again (both answers: it waits), so no
        // later count of this Locker is its own or an earlier request's. A
        // request held back in its process never gets there: the next is
        // made after a while anyway (a loaded store may take a while to
        // answer), and the order tells.
        let queued = counts.acquires_reach(asked + 2);
        let _ = tokio::time::timeout(Duration::from_secs(5), queued).await;
    }
    if let Some(cancelled) = cancel {
        // Dropped (its queue entry withdrawn) before the holder lets go.
        let task = &mut tasks[cancelled];
        task.abort();
        let dropped = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the cancelled waiter was not dropped");
        assert!(
            dropped.as_ref().is_err_and(|err| err.is_cancelled()),
            "{dropped:?}"
        );
    }
    first.release().await.unwrap();
    for (i, task) in tasks.into_iter().enumerate() {
        if Some(i) == cancel {
            continue;
        }
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a fair waiter was never served")
            .unwrap();
    }
    order.lock().unwrap().clone()
}

/// A cancelled waiter leaves the queue at once; a vanished one (its future
/// forgotten, as if its process died) delays it by at most its queue entry's
/// lease, the ttl.
pub async fn fair_queue_survives_cancelled_and_vanished_waiters(store: TestStore) {
    let ttl = Duration::from_millis(1200);
    let holder = store.locker().await;
    let held = holder.fair_lock("line").ttl(ttl).await.unwrap();
    // A waiter that gives up: its queue entry goes with it.
    let (quitter, counts) = store.locker_with(|l| l.ttl(Duration::from_secs(30))).await;
    let asked = counts.acquires();
    let quitting = tokio::spawn(async move { quitter.fair_lock("line").await });
    counts.acquires_reach(asked + 1).await;
    quitting.abort();
    let _ = quitting.await;
    // A waiter that vanishes: its queue entry stays until its lease lapses.
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
    let guard = next_behind_a_dead_ticket(&store, held, ttl).await;
    let after = queued_at.elapsed();
    // The dead waiter came first: it held the place until its queue entry
    // lapsed (its lease counts from the store's answer, which `queued_at`
    // follows by however late this task is scheduled: half the ttl of margin).
    assert!(after >= ttl / 2, "served after {after:?}");
    assert!(after <= ttl + SLACK * 2, "served after {after:?}");
    guard.release().await.unwrap();
    super::store_is_empty(&store).await;
}

/// 3 processes x 4 tasks line up in a known order (each process once the
/// one before has its queue entries in the store): grants follow that order, a
/// process's requests together, not one per process in turn. The order is
/// read from the tokens, which rise in grant order.
pub async fn fair_grants_follow_arrival_across_processes(store: TestStore) {
    let Some(url) = store.process_url() else {
        return; // A store in this process: no other process reaches it.
    };
    let holder = store.locker().await;
    let held = holder.fair_lock("fifo").await.unwrap();
    let mut tickets = waiters(&holder, "fifo").await;
    let mut processes = Vec::new();
    for name in ["a", "b", "c"] {
        let mut waiter = fair_waiter(&url, "fifo", name, 4, Duration::from_secs(30));
        assert_eq!(waiter.line(), "lined up");
        // Every task's own queue entry (none waits behind another in its process).
        tickets += 4;
        waiters_reach(&holder, "fifo", tickets).await;
        processes.push(waiter);
    }
    held.release().await.unwrap();
    let mut served: Vec<(u64, String)> = Vec::new();
    for waiter in processes {
        for line in waiter.finish().lines() {
            let (name, token) = line.split_once(' ').expect("`<name> <token>`");
            served.push((token.parse().expect("a token"), name.to_owned()));
        }
    }
    served.sort();
    let order: Vec<String> = served.into_iter().map(|(_, name)| name).collect();
    let expected: Vec<String> = ["a", "b", "c"]
        .into_iter()
        .flat_map(|p| (1..=4).map(move |i| format!("{p}{i}")))
        .collect();
    assert_eq!(
        order, expected,
        "not granted in the order the processes queued"
    );
    super::store_is_empty(&store).await;
}

/// A waiter process killed in the queue (SIGKILL: it withdraws nothing)
/// delays it by at most its queue entry's lease: the next waiter gets the lock
/// within that ttl of the kill.
pub async fn a_killed_fair_waiter_process_delays_the_queue_by_its_ttl_at_most(store: TestStore) {
    // etcd's shortest lease.
    let ttl = Duration::from_secs(2);
    let Some(url) = store.process_url() else {
        return; // A store in this process: no other process reaches it.
    };
    let holder = store.locker().await;
    let held = holder.fair_lock("line").await.unwrap();
    let tickets = waiters(&holder, "line").await;
    let mut dead = fair_waiter(&url, "line", "dead", 1, ttl);
    assert_eq!(dead.line(), "lined up");
    waiters_reach(&holder, "line", tickets + 1).await;
    dead.kill();
    let killed = Instant::now();
    let guard = next_behind_a_dead_ticket(&store, held, ttl).await;
    let after = killed.elapsed();
    assert!(after <= ttl + SLACK, "served {after:?} after the kill");
    // The dead queue entry stood (renewed every ttl/3 while its process lived).
    assert!(
        after >= ttl / 2,
        "served {after:?} after the kill, past its ticket"
    );
    guard.release().await.unwrap();
    super::store_is_empty(&store).await;
}

/// Queues a fair request of a fresh Locker on `line`, behind a dead
/// waiter's queue entry, lets `held` go, and returns the new request's guard once
/// served: within the dead queue entry's lease `ttl` (and some slack).
async fn next_behind_a_dead_ticket(store: &TestStore, held: LockGuard, ttl: Duration) -> LockGuard {
    let (next, counts) = store.locker_with(|l| l).await;
    let asked = counts.acquires();
    let waiting =
        tokio::spawn(async move { next.fair_lock("line").wait(Duration::from_secs(30)).await });
    counts.acquires_reach(asked + 1).await;
    held.release().await.unwrap();
    tokio::time::timeout(ttl + SLACK * 2, waiting)
        .await
        .expect("a dead waiter blocked the queue past its ticket's lease")
        .unwrap()
        .unwrap()
}

/// A `fair_waiter` process with `tasks` tasks on `key` of the store at
/// `url` ([`TestStore::process_url`]), each printing `<name><i> <token>`
/// when served.
fn fair_waiter(
    url: &(String, Option<std::path::PathBuf>),
    key: &str,
    name: &str,
    tasks: u32,
    ttl: Duration,
) -> Process {
    let (url, ca) = url;
    let mut args = vec![
        url.clone(),
        key.into(),
        name.into(),
        tasks.to_string(),
        ttl.as_millis().to_string(),
    ];
    args.extend(ca.as_ref().map(|ca| ca.display().to_string()));
    Process::spawn(env!("CARGO_BIN_EXE_fair_waiter"), &args)
}

/// The queue entries the store keeps for waiters on `key`.
async fn waiters(locker: &Locker, key: &str) -> usize {
    let inspection = locker.inspect(key).await.unwrap();
    inspection.waiters.queued
}

/// Waits until the store keeps `n` queue entries for `key` (another process's
/// requests: there is no event to wait on here, so the store is asked).
async fn waiters_reach(locker: &Locker, key: &str, n: usize) {
    let reached = async {
        while waiters(locker, key).await < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reached)
        .await
        .unwrap_or_else(|_| panic!("the store never kept {n} tickets for {key}"));
}

/// A process's fair requests reach the store in the order they were made:
/// the second asks only once the first's first try is answered, so a first
/// try held up in its process (here, by a gate in front of the store) is
/// not overtaken.
pub async fn fair_requests_of_a_process_reach_the_store_in_call_order(store: TestStore) {
    let holder = store.locker().await;
    let (locker, counts) = store.locker_with(|l| l).await;
    let held = holder.fair_lock("sends").await.unwrap();
    counts.hold_next_fair_try();
    let order = Arc::new(Mutex::new(Vec::new()));
    let request = |i: usize| {
        let (locker, order) = (locker.clone(), Arc::clone(&order));
        tokio::spawn(async move {
            let request = locker.fair_lock("sends").wait(Duration::from_secs(20));
            let guard = request.await.unwrap();
            order.lock().unwrap().push(i);
            guard.release().await.unwrap();
        })
    };
    let asked = counts.acquires();
    let first = request(1);
    counts.fair_tries_reach(1).await;
    let second = request(2);
    // Nothing to wait for: the second must not ask while the first is held.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        counts.fair_tries(),
        1,
        "a fair request asked the store before the first one's first try was answered"
    );
    counts.open_gate();
    // Each asked, subscribed and asked again: both wait in the store's line.
    counts.acquires_reach(asked + 4).await;
    held.release().await.unwrap();
    for task in [first, second] {
        let done = tokio::time::timeout(Duration::from_secs(30), task).await;
        done.expect("a fair waiter was never served").unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [1, 2], "granted out of call order");
    super::store_is_empty(&store).await;
}
