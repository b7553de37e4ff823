//! Deferred watchdog starts: nothing happens to a lease before its first
//! renewal is due (a third of its ttl), and most leases on a hot path are
//! released long before that. So instead of a task per lease from the
//! start, a lease is entered in a timetable that one task per runtime and
//! Locker serves; only a lease still held when its entry comes due gets its
//! own watchdog task. Taking and releasing a lock then costs filling and
//! emptying a slot of the timetable instead of spawning, scheduling and
//! aborting a task.
//!
//! Built for many threads taking locks at once: a timetable is a set of
//! padded shards (`KeyShards`), each a slab, and a thread enters its leases
//! in a shard of its own, so that two worker threads do not pass the same
//! cache lines back and forth on every lock; the first runtime's timetable
//! is found without taking a lock. A slab fills and empties a slot in a few
//! instructions; the runner, which wakes about once per lead time, pays for
//! the order by scanning the slots there are.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use tokio::runtime::{Handle as RuntimeHandle, Id};
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::{Instant, sleep_until};

use super::{Plan, watch};
use crate::backend::key_shards::{KeyShards, SHARDS};
use crate::lease::LeaseState;

/// The timetables of one Locker, one per runtime it is used on (a task of
/// one runtime cannot be relied on to run for another).
#[derive(Default)]
pub(crate) struct Watchdogs {
    /// The first runtime's, read without a lock.
    first: OnceLock<(Id, Arc<Timetable>)>,
    /// Those of any later runtimes.
    others: Mutex<Vec<(Id, Arc<Timetable>)>>,
}

/// Due watchdog starts of one runtime, served by its runner task.
pub(crate) struct Timetable {
    shards: KeyShards<Table>,
    /// A new entry became the earliest, or the timetable is gone (shared
    /// with the runner, which keeps no strong reference while it waits).
    changed: Arc<Notify>,
    /// The runner task is alive (false once its runtime dropped it).
    running: AtomicBool,
}

#[derive(Default)]
struct Table {
    /// Entries by slot; `None` is a free slot.
    slots: Vec<Option<Entry>>,
    /// Free slots, reused before the slab grows.
    free: Vec<usize>,
    /// Slots filled.
    filled: usize,
    /// Stamps entries, so that a stop never takes out a later entry that
    /// reuses the slot of its own.
    next_stamp: u64,
    /// When the runner wakes next on its own (`None`: only when told), as
    /// the runner last set it in every shard. An entry due later needs no
    /// wake-up: locks taken and released within a third of their ttl never
    /// wake the runner.
    runner_wakes_at: Option<Instant>,
    /// The shortest time from entering to coming due seen so far. With an
    /// empty table the runner still wakes that far ahead, so a lock taken
    /// and released before the runner ran does not cost a wake-up of the
    /// next one (which, on an idle worker thread, is a futex wake).
    shortest_lead: Option<Duration>,
}

struct Entry {
    due: Instant,
    stamp: u64,
    lease: Arc<LeaseState>,
    plan: Plan,
}

/// Where an entry sits in a timetable: its shard, slot and stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Place {
    shard: usize,
    slot: usize,
    stamp: u64,
}

/// Where one lease's watchdog stands (kept in the lease, so that starting
/// one allocates nothing).
#[derive(Default)]
pub(crate) enum Control {
    /// Waiting in this timetable at this place. The timetable is kept
    /// alive by its Locker and by the leases scheduled in it (a cycle
    /// through the entry, broken when the lease's watchdog starts or
    /// stops: a guard leaked with `mem::forget` keeps it); its runner ends
    /// when it is gone.
    Scheduled(Arc<Timetable>, Place),
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
        Control::Scheduled(timetable, place) => {
            timetable.shard(place.shard).take(place);
        }
        Control::Running(task) => task.abort(),
        Control::Stopped => {}
    }
}

thread_local! {
    /// The shard this thread enters leases in.
    static HOME_SHARD: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The shard of the calling thread: threads take shards in turn.
fn home_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    HOME_SHARD.with(|home| {
        home.get().unwrap_or_else(|| {
            let shard = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
            home.set(Some(shard));
            shard
        })
    })
}

impl Watchdogs {
    /// Watches `lease`, taken with a request sent at `sent`, with `plan`;
    /// its first renewal is due `lead` later.
    /// Must be called on a Tokio runtime.
    pub(crate) fn start(&self, lease: Arc<LeaseState>, plan: Plan, sent: Instant, lead: Duration) {
        let due = sent + lead;
        let runtime = RuntimeHandle::current();
        // The first runtime's timetable is found without a lock.
        let timetable = match self.first.get() {
            Some((id, timetable)) if *id == runtime.id() => Arc::clone(timetable),
            _ => self.timetable(&runtime),
        };
        let shard = home_shard();
        // The lease's own lock is held across the entry, so that the
        // runner, which takes the lease's lock after the table's, finds the
        // entry's place recorded in it.
        let mut control = lease.watchdog();
        let wake_runner = {
            let mut table = timetable.shard(shard);
            let place = table.put(shard, due, Arc::clone(&lease), plan);
            *control = Control::Scheduled(Arc::clone(&timetable), place);
            table.shortest_lead = Some(table.shortest_lead.map_or(lead, |l| l.min(lead)));
            let sooner = table.runner_wakes_at.is_none_or(|at| due < at);
            if sooner {
                table.runner_wakes_at = Some(due);
            }
            sooner
        };
        drop(control);
        if wake_runner {
            timetable.changed.notify_one();
        }
    }

    /// The timetable of `runtime`, with a live runner; made if there is
    /// none.
    fn timetable(&self, runtime: &RuntimeHandle) -> Arc<Timetable> {
        let id = runtime.id();
        // The first timetable is set only under this lock.
        let mut others = self.others.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((first, timetable)) = self.first.get()
            && *first == id
        {
            return Arc::clone(timetable);
        }
        if let Some((_, timetable)) = others.iter().find(|(i, _)| *i == id) {
            return Arc::clone(timetable);
        }
        // A new runtime: forget those that shut down (their runners went
        // with them) before adding it.
        others.retain(|(_, t)| t.running.load(Ordering::Acquire));
        let timetable = Arc::new(Timetable::new());
        let changed = Arc::clone(&timetable.changed);
        runtime.spawn(run(Arc::downgrade(&timetable), changed));
        if self.first.set((id, Arc::clone(&timetable))).is_ok() {
            return timetable;
        }
        others.push((id, Arc::clone(&timetable)));
        timetable
    }
}

impl Timetable {
    fn new() -> Self {
        Timetable {
            shards: Default::default(),
            changed: Arc::new(Notify::new()),
            running: AtomicBool::new(true),
        }
    }

    fn shard(&self, shard: usize) -> MutexGuard<'_, Table> {
        self.shards.lock(shard)
    }

    /// Takes the entries due by now and notes when the runner wakes next
    /// (`None`: only when told).
    fn take_due(&self) -> (Vec<Entry>, Option<Instant>) {
        let now = Instant::now();
        let mut due = Vec::new();
        let mut earliest: Option<Instant> = None;
        let mut shortest_lead: Option<Duration> = None;
        for shard in 0..SHARDS {
            let mut table = self.shard(shard);
            // A lease entered in this shard while the others are scanned
            // was not counted: its starter must wake the runner.
            table.runner_wakes_at = None;
            for slot in 0..table.slots.len() {
                match &table.slots[slot] {
                    Some(entry) if entry.due <= now => {
                        let stamp = entry.stamp;
                        due.extend(table.take(Place { shard, slot, stamp }));
                    }
                    Some(entry) => {
                        earliest = Some(earliest.map_or(entry.due, |e| e.min(entry.due)));
                    }
                    None => {}
                }
            }
            if table.filled == 0 {
                // Give back the room a burst of locks took.
                table.slots = Vec::new();
                table.free = Vec::new();
            }
            shortest_lead = match (shortest_lead, table.shortest_lead) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let next = match earliest {
            Some(at) => Some(at),
            None => shortest_lead.map(|lead| now + lead),
        };
        for shard in 0..SHARDS {
            self.shard(shard).runner_wakes_at = next;
        }
        (due, next)
    }
}

impl Table {
    /// Enters `lease`, due at `due`, in a free slot of this shard.
    fn put(&mut self, shard: usize, due: Instant, lease: Arc<LeaseState>, plan: Plan) -> Place {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        let entry = Some(Entry {
            due,
            stamp,
            lease,
            plan,
        });
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = entry;
                slot
            }
            None => {
                self.slots.push(entry);
                self.slots.len() - 1
            }
        };
        self.filled += 1;
        Place { shard, slot, stamp }
    }

    /// Takes out the entry at `place`, if it is still there.
    fn take(&mut self, place: Place) -> Option<Entry> {
        let slot = self.slots.get_mut(place.slot)?;
        if slot.as_ref().is_none_or(|entry| entry.stamp != place.stamp) {
            return None;
        }
        let entry = slot.take();
        self.free.push(place.slot);
        self.filled -= 1;
        entry
    }
}

impl Drop for Timetable {
    fn drop(&mut self) {
        // Its Locker and its last scheduled lease are gone: the runner ends.
        self.changed.notify_one();
    }
}

/// Marks the timetable dead when the runner is dropped (its runtime shut
/// down), so the next lock on another runtime starts a new one.
struct Running(Weak<Timetable>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(timetable) = self.0.upgrade() {
            timetable.running.store(false, Ordering::Release);
        }
    }
}

/// The runner: starts each entry's watchdog task when it comes due; ends
/// when the timetable is gone (its Locker dropped, and no lease scheduled
/// in it).
async fn run(timetable: Weak<Timetable>, changed: Arc<Notify>) {
    let running = Running(timetable);
    loop {
        let Some(timetable) = running.0.upgrade() else {
            return;
        };
        let (due, next) = timetable.take_due();
        drop(timetable);
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
            None => changed.notified().await,
            Some(at) => {
                tokio::select! {
                    _ = sleep_until(at) => {}
                    _ = changed.notified() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
