//! Deferred watchdog starts: nothing happens to a lease before its first
//! renewal is due (a third of its ttl), and most leases on a hot path are
//! released long before that. So instead of a task per lease from the
//! start, a lease is entered in a timetable that one task per runtime and
//! Locker serves; only a lease still held when its entry comes due gets its
//! own watchdog task. Taking and releasing a lock then costs a map insert
//! and remove instead of spawning, scheduling and aborting a task.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::{Handle as RuntimeHandle, Id};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until};

use super::{Plan, watch};
use crate::lease::LeaseState;

/// The timetables of one Locker, one per runtime it is used on (a task of
/// one runtime cannot be relied on to run for another).
#[derive(Default)]
pub(crate) struct Watchdogs {
    timetables: Mutex<Vec<(Id, Arc<Timetable>)>>,
}

/// Due watchdog starts of one runtime, served by its runner task.
#[derive(Default)]
pub(crate) struct Timetable {
    table: Mutex<Table>,
    next_seq: AtomicU64,
    /// A new entry became the earliest.
    changed: Notify,
    /// The runner task is alive (false once its runtime dropped it).
    running: AtomicBool,
    /// The Locker is gone: the runner ends once the timetable is empty.
    orphaned: AtomicBool,
}

#[derive(Default)]
struct Table {
    entries: BTreeMap<(Instant, u64), Entry>,
    /// When the runner wakes next on its own (`None`: only when told).
    /// An entry due later needs no wake-up: locks taken and released
    /// within a third of their ttl never wake the runner.
    runner_wakes_at: Option<Instant>,
    /// The shortest time from entering to coming due seen so far. With an
    /// empty table the runner still wakes that far ahead, so a lock taken
    /// and released before the runner ran does not cost a wake-up of the
    /// next one (which, on an idle worker thread, is a futex wake).
    shortest_lead: Option<Duration>,
}

struct Entry {
    lease: Arc<LeaseState>,
    plan: Plan,
}

/// Where one lease's watchdog stands (kept in the lease, so that starting
/// one allocates nothing).
#[derive(Default)]
pub(crate) enum Control {
    /// Waiting in the timetable under this key.
    Scheduled(Weak<Timetable>, (Instant, u64)),
    /// Its task is running.
    Running(AbortHandle),
    #[default]
    Stopped,
}

/// Stops `lease`'s watchdog now, whether it has started or not (again: a
/// no-op): a scheduled start is taken out of the timetable, a running task
/// is aborted.
pub(crate) fn stop(lease: &LeaseState) {
    let control = std::mem::take(&mut *lease.watchdog());
    match control {
        Control::Scheduled(timetable, key) => {
            if let Some(timetable) = timetable.upgrade() {
                timetable.lock().entries.remove(&key);
            }
        }
        Control::Running(task) => task.abort(),
        Control::Stopped => {}
    }
}

impl Watchdogs {
    /// Watches `lease`, taken with a request sent at `sent`, with `plan`;
    /// its first renewal is due `lead` later.
    /// Must be called on a Tokio runtime.
    pub(crate) fn start(&self, lease: Arc<LeaseState>, plan: Plan, sent: Instant, lead: Duration) {
        let first_due = sent + lead;
        let timetable = self.timetable();
        let key = (
            first_due,
            timetable.next_seq.fetch_add(1, Ordering::Relaxed),
        );
        *lease.watchdog() = Control::Scheduled(Arc::downgrade(&timetable), key);
        let wake_runner = {
            let mut table = timetable.lock();
            table.entries.insert(key, Entry { lease, plan });
            table.shortest_lead = Some(table.shortest_lead.map_or(lead, |l| l.min(lead)));
            let sooner = table.runner_wakes_at.is_none_or(|at| first_due < at);
            if sooner {
                table.runner_wakes_at = Some(first_due);
            }
            sooner
        };
        if wake_runner {
            timetable.changed.notify_one();
        }
    }

    /// This runtime's timetable, with a live runner.
    fn timetable(&self) -> Arc<Timetable> {
        let runtime = RuntimeHandle::current();
        let id = runtime.id();
        let mut timetables = self
            .timetables
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((_, timetable)) = timetables.iter().find(|(i, _)| *i == id) {
            return Arc::clone(timetable);
        }
        // A new runtime: forget those that shut down (their runners went
        // with them) before adding it.
        timetables.retain(|(_, t)| t.running.load(Ordering::Acquire));
        let timetable = Arc::new(Timetable {
            running: AtomicBool::new(true),
            ..Timetable::default()
        });
        runtime.spawn(run(Arc::clone(&timetable)));
        timetables.push((id, Arc::clone(&timetable)));
        timetable
    }
}

impl Drop for Watchdogs {
    fn drop(&mut self) {
        let timetables = self
            .timetables
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for (_, timetable) in timetables.drain(..) {
            timetable.orphaned.store(true, Ordering::Release);
            timetable.changed.notify_one();
        }
    }
}

impl Timetable {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the entries due by now and notes when the runner wakes next
    /// (`None`: only when told).
    fn take_due(&self) -> (Vec<Entry>, Option<Instant>) {
        let now = Instant::now();
        let mut table = self.lock();
        let mut due = Vec::new();
        while let Some(first) = table.entries.first_entry() {
            if first.key().0 > now {
                break;
            }
            due.push(first.remove());
        }
        let next = match table.entries.keys().next() {
            Some((at, _)) => Some(*at),
            None if self.orphaned.load(Ordering::Acquire) => None,
            None => table.shortest_lead.map(|lead| now + lead),
        };
        table.runner_wakes_at = next;
        (due, next)
    }
}

/// Marks the timetable dead when the runner is dropped (its runtime shut
/// down), so the next lock on another runtime starts a new one.
struct Running(Arc<Timetable>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Release);
    }
}

/// The runner: starts each entry's watchdog task when it comes due; ends
/// when its Locker is gone and nothing is left to start.
async fn run(timetable: Arc<Timetable>) {
    let running = Running(timetable);
    let timetable = &running.0;
    loop {
        let (due, next) = timetable.take_due();
        for entry in due {
            let lease = Arc::clone(&entry.lease);
            let mut control = lease.watchdog();
            // A stop that raced with taking the entry wins.
            if matches!(*control, Control::Scheduled(..)) {
                let task = tokio::spawn(watch(entry.lease, entry.plan, Instant::now()));
                *control = Control::Running(task.abort_handle());
            }
        }
        match next {
            None if timetable.orphaned.load(Ordering::Acquire) => return,
            None => timetable.changed.notified().await,
            Some(at) => {
                tokio::select! {
                    _ = sleep_until(at) => {}
                    _ = timetable.changed.notified() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locker;
    use std::time::Duration;

    impl Watchdogs {
        /// Entries waiting in every timetable.
        fn scheduled(&self) -> usize {
            let timetables = self.timetables.lock().unwrap();
            timetables.iter().map(|(_, t)| t.lock().entries.len()).sum()
        }

        fn runners(&self) -> Vec<Arc<Timetable>> {
            let timetables = self.timetables.lock().unwrap();
            timetables.iter().map(|(_, t)| Arc::clone(t)).collect()
        }
    }

    #[tokio::test]
    async fn a_lock_released_early_never_starts_a_task_and_leaves_no_entry() {
        let locker = Locker::memory();
        let guard = locker.lock("k").ttl(Duration::from_secs(30)).await.unwrap();
        assert_eq!(locker.inner.watchdogs.scheduled(), 1);
        guard.release().await.unwrap();
        assert_eq!(locker.inner.watchdogs.scheduled(), 0);
        drop(locker.lock("k").await.unwrap()); // dropped, not released
        assert_eq!(locker.inner.watchdogs.scheduled(), 0);
    }

    #[tokio::test]
    async fn a_lock_held_past_its_first_renewal_gets_renewed() {
        let locker = Locker::memory();
        let guard = locker
            .lock("k")
            .ttl(Duration::from_millis(150))
            .await
            .unwrap();
        // Held for three ttls: only renewals keep it (the contract under test).
        tokio::time::sleep(Duration::from_millis(450)).await;
        assert_eq!(
            locker.inner.watchdogs.scheduled(),
            0,
            "the watchdog started"
        );
        assert!(guard.is_held(), "renewed by the started watchdog");
        guard.release().await.unwrap();
    }

    #[tokio::test]
    async fn the_runner_ends_with_its_locker() {
        let locker = Locker::memory();
        drop(locker.lock("k").await.unwrap());
        let runners = locker.inner.watchdogs.runners();
        assert_eq!(runners.len(), 1);
        drop(locker);
        while runners[0].running.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
    }
}
