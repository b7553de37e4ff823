use super::*;
use crate::Locker;
use std::time::Duration;

impl Watchdogs {
    /// Every timetable.
    fn all(&self) -> Vec<Arc<Timetable>> {
        let others = self.others.lock().unwrap_or_else(PoisonError::into_inner);
        let first = self.first.get().map(|(_, t)| Arc::clone(t));
        first
            .into_iter()
            .chain(others.iter().map(|(_, t)| Arc::clone(t)))
            .collect()
    }

    /// Entries waiting in every timetable.
    fn scheduled(&self) -> usize {
        let shards = |t: &Arc<Timetable>| (0..SHARDS).map(|s| t.shard(s).filled).sum::<usize>();
        self.all().iter().map(shards).sum()
    }

    fn runners(&self) -> Vec<Arc<Timetable>> {
        self.all()
    }
}

#[tokio::test]
async fn a_lock_released_early_never_starts_a_task_and_leaves_no_entry() {
    let locker = Locker::memory();
    let guard = locker.lock("k").ttl(Duration::from_secs(30)).await.unwrap();
    assert_eq!(locker.watchdogs().scheduled(), 1);
    guard.release().await.unwrap();
    assert_eq!(locker.watchdogs().scheduled(), 0);
    drop(locker.lock("k").await.unwrap()); // dropped, not released
    assert_eq!(locker.watchdogs().scheduled(), 0);
}

/// A lock of 600 ms held for three ttls: only renewals keep it (the
/// contract under test; 200 ms between renewals leaves a busy machine
/// room to run them).
async fn held_for_three_ttls(locker: &Locker) -> crate::LockGuard {
    let guard = locker
        .lock("k")
        .ttl(Duration::from_millis(600))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1800)).await;
    guard
}

#[tokio::test]
async fn a_lock_held_past_its_first_renewal_gets_renewed() {
    let locker = Locker::memory();
    let guard = held_for_three_ttls(&locker).await;
    assert_eq!(locker.watchdogs().scheduled(), 0, "the watchdog started");
    assert!(guard.is_held(), "renewed by the started watchdog");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn dropping_the_locker_frees_its_timetable_and_ends_the_runner() {
    let locker = Locker::memory();
    drop(locker.lock("k").await.unwrap());
    let runners = locker.watchdogs().runners();
    assert_eq!(runners.len(), 1);
    let timetable = Arc::downgrade(&runners[0]);
    drop(runners);
    let held = locker.lock("held").await.unwrap();
    // On this one-thread runtime a yield runs the runner, which then
    // waits for the entry's due time.
    tokio::task::yield_now().await;
    drop(locker);
    // A guard still scheduled keeps it (and its watchdog start) alive.
    assert!(timetable.upgrade().is_some());
    drop(held);
    assert!(timetable.upgrade().is_none(), "nothing else keeps it");
    // Its Drop woke the runner, which ends at once.
    let metrics = tokio::runtime::Handle::current().metrics();
    for _ in 0..100 {
        if metrics.num_alive_tasks() == 0 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(metrics.num_alive_tasks(), 0, "the runner lives on");
}

#[test]
fn a_stop_never_takes_out_the_entry_that_reused_its_slot() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let locker = Locker::memory();
    let (first, second) = runtime.block_on(async {
        let first = locker.lock("a").await.unwrap();
        let second = locker.lock("b").await.unwrap();
        (first, second)
    });
    let mut table = Table::default();
    let plan = Plan {
        renew: true,
        hold_until: None,
    };
    let due = Instant::now() + Duration::from_secs(10);
    let old = table.put(0, due, Arc::clone(&first.lease), plan);
    assert!(table.take(old).is_some());
    let new = table.put(0, due, Arc::clone(&second.lease), plan);
    assert_eq!(new.slot, old.slot, "the slot is reused");
    assert!(table.take(old).is_none(), "a late stop of the old entry");
    assert_eq!(table.filled, 1);
    let taken = table.take(new).expect("the new entry is still there");
    assert!(Arc::ptr_eq(&taken.lease, &second.lease));
    runtime.block_on(async {
        first.release().await.unwrap();
        second.release().await.unwrap();
    });
}

#[test]
fn a_locker_renews_on_a_runtime_after_its_first_one_shut_down() {
    let locker = Locker::memory();
    let first = tokio::runtime::Runtime::new().unwrap();
    first.block_on(async { drop(locker.lock("k").await.unwrap()) });
    drop(first);
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let guard = held_for_three_ttls(&locker).await;
        assert!(guard.is_held(), "renewed on the second runtime");
        assert_eq!(locker.watchdogs().runners().len(), 2);
        guard.release().await.unwrap();
    });
}
