//! Process-local queueing in front of the store (the seed's local lock).
//!
//! Tasks of one process that want the same key line up FIFO here, and only
//! the head of the line talks to the store; the others wait without any
//! traffic. A task keeps its slot while it holds the lease, so when it
//! releases, the next local task contends at once. The slot is freed when
//! the lease is released or lost.

use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::keys::{KeyMap, StoredKeys};
use crate::sharded::Sharded;

/// Why a task got no local slot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoSlot {
    /// Another task of this process holds or is taking the key.
    Busy,
    /// The wait deadline passed in the local line.
    TimedOut,
    /// The line is at its bound.
    Full,
}

/// The local lines of one Locker, by lock (sharded).
#[derive(Debug)]
pub(crate) struct LocalQueues {
    lines: Sharded<Lines>,
    max_waiters: usize,
}

/// The line of each key, present while a task holds or takes its slot:
/// `None` while nobody waits (the common case, which allocates nothing
/// beyond the map entry), else the queue of waiters (or of a handed-over
/// slot not yet taken).
type Lines = KeyMap<Option<Arc<Queue>>>;

/// Waiters of one key, in FIFO order. The slot is the semaphore's one
/// permit; it is out (held, not in the semaphore) while a task has the
/// slot. Only the map and waiting tasks hold the `Arc`, so a strong count
/// of one means nobody waits.
#[derive(Debug)]
struct Queue {
    gate: Semaphore,
    waiting: AtomicUsize,
}

/// The slot for one key, held while contending and while the lease is
/// held; dropping it hands the slot to the next waiter or ends the line.
#[derive(Debug)]
pub(crate) struct LocalSlot {
    queues: Arc<LocalQueues>,
    keys: StoredKeys,
}

impl Drop for LocalSlot {
    fn drop(&mut self) {
        self.queues.leave(&self.keys);
    }
}

/// A slot just taken by [`LocalQueues::try_enter`], borrowed from its
/// queues: freed if dropped, else handed on (to a lease that frees it
/// through its Locker, or as an owned [`LocalSlot`]).
#[derive(Debug)]
pub(crate) struct Entered<'a> {
    queues: &'a Arc<LocalQueues>,
    keys: &'a StoredKeys,
    armed: bool,
}

impl Entered<'_> {
    /// The slot as an owned value.
    pub(crate) fn owned(mut self) -> LocalSlot {
        self.armed = false;
        self.queues.slot(self.keys)
    }

    /// Hands the slot to the lease on these keys, which frees it through
    /// its Locker ([`LocalQueues::leave`]).
    pub(crate) fn into_lease(mut self) {
        self.armed = false;
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.queues.leave(self.keys);
        }
    }
}

/// A waiter's place in a queue: counted while it waits; if it leaves
/// without the slot, it ends a line that nobody holds or waits in.
struct Waiter<'a> {
    queues: &'a LocalQueues,
    keys: &'a StoredKeys,
    queue: Option<Arc<Queue>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let Some(queue) = self.queue.take() else {
            return;
        };
        queue.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut lines = self.queues.lines(self.keys);
        // Only the map and this waiter know the queue, and the slot sits
        // unclaimed in it (handed over as this waiter gave up): no one is
        // left to end the line.
        let abandoned = Arc::strong_count(&queue) == 2 && queue.gate.available_permits() == 1;
        // Let go while the shard is locked, so that a holder ending its
        // slot next sees that this waiter is gone.
        drop(queue);
        if abandoned {
            lines.remove(self.keys);
        }
    }
}

/// What `enter` found under the shard lock.
enum Found {
    Slot,
    Wait(Arc<Queue>),
}

impl LocalQueues {
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(LocalQueues {
            lines: Sharded::default(),
            max_waiters,
        })
    }

    /// The shard holding the line of `keys`, locked.
    fn lines(&self, keys: &StoredKeys) -> MutexGuard<'_, Lines> {
        self.lines.lock_keys(keys)
    }

    fn slot(self: &Arc<Self>, keys: &StoredKeys) -> LocalSlot {
        LocalSlot {
            queues: Arc::clone(self),
            keys: keys.clone(),
        }
    }

    /// Takes the slot if it is free; else, if `join`, joins the queue.
    fn find(self: &Arc<Self>, keys: &StoredKeys, join: bool) -> Result<Found, NoSlot> {
        let mut lines = self.lines(keys);
        let line = match lines.entry(keys.clone()) {
            Entry::Vacant(free) => {
                free.insert(None);
                return Ok(Found::Slot);
            }
            Entry::Occupied(line) => line.into_mut(),
        };
        if let Some(queue) = line {
            // A slot handed over to a waiter that gave up.
            if let Ok(permit) = queue.gate.try_acquire() {
                permit.forget();
                return Ok(Found::Slot);
            }
        }
        if !join {
            return Err(NoSlot::Busy);
        }
        let queue = line.get_or_insert_with(|| {
            Arc::new(Queue {
                gate: Semaphore::new(0),
                waiting: AtomicUsize::new(0),
            })
        });
        if queue.waiting.load(Ordering::Relaxed) >= self.max_waiters {
            return Err(NoSlot::Full);
        }
        queue.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(Found::Wait(Arc::clone(queue)))
    }

    /// Takes the slot for `keys` now, or says it is busy.
    pub(crate) fn try_enter<'a>(
        self: &'a Arc<Self>,
        keys: &'a StoredKeys,
    ) -> Result<Entered<'a>, NoSlot> {
        self.find(keys, false)?;
        Ok(Entered {
            queues: self,
            keys,
            armed: true,
        })
    }

    /// Gives up the slot for `keys`: hands it to the next waiter, or ends
    /// the line.
    pub(crate) fn leave(&self, keys: &StoredKeys) {
        let mut lines = self.lines(keys);
        // Taken out at once: the common case is a line nobody waits in.
        if let Some((stored, Some(queue))) = lines.remove_entry(keys)
            && Arc::strong_count(&queue) > 1
        {
            // Somebody waits: hand the slot over and keep the line.
            queue.gate.add_permits(1);
            lines.insert(stored, Some(queue));
        }
    }

    /// Waits in line (FIFO) for the slot for `keys` until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the line and takes no slot.
    pub(crate) async fn enter(
        self: &Arc<Self>,
        keys: &StoredKeys,
        deadline: Instant,
    ) -> Result<LocalSlot, NoSlot> {
        let queue = match self.find(keys, true)? {
            Found::Slot => return Ok(self.slot(keys)),
            Found::Wait(queue) => queue,
        };
        let mut waiter = Waiter {
            queues: self,
            keys,
            queue: Some(queue),
        };
        let gate = &waiter.queue.as_ref().expect("set above").gate;
        let acquired = match tokio::time::timeout_at(deadline, gate.acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                true
            }
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => false,
        };
        if !acquired {
            return Err(NoSlot::TimedOut);
        }
        // Holders keep no reference to the queue: its count says who waits.
        if let Some(queue) = waiter.queue.take() {
            queue.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(self.slot(keys))
    }

    /// Tasks waiting in line for `keys` (not counting the head).
    pub(crate) fn waiting(&self, keys: &StoredKeys) -> usize {
        match self.lines(keys).get(keys) {
            Some(Some(queue)) => queue.waiting.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// Lines currently open (keys held or awaited by this process).
    pub(crate) fn open_lines(&self) -> usize {
        self.lines.sum(Lines::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[tokio::test]
    async fn lines_are_fifo_and_vanish_when_empty() {
        let queues = LocalQueues::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        let first = queues.try_enter(&k).unwrap().owned();
        assert_eq!(queues.try_enter(&k).unwrap_err(), NoSlot::Busy);
        let deadline = Instant::now() + Duration::from_secs(5);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (q, order, mine) = (Arc::clone(&queues), Arc::clone(&order), k.clone());
            tasks.push(tokio::spawn(async move {
                let slot = q.enter(&mine, deadline).await.unwrap();
                order.lock().unwrap().push(i);
                drop(slot);
            }));
            // Let each task join the line before the next one.
            while queues.waiting(&k) <= i {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(queues.open_lines(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_ends_with_its_last_holder_or_waiter() {
        let queues = LocalQueues::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        // A waiter that times out leaves the holder's line in place.
        let first = queues.try_enter(&k).unwrap().owned();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(queues.enter(&k, soon).await.unwrap_err(), NoSlot::TimedOut);
        assert_eq!((queues.open_lines(), queues.waiting(&k)), (1, 0));
        drop(first);
        assert_eq!(queues.open_lines(), 0);
        // The slot is handed to a waiter that gives up before taking it:
        // the waiter ends the line, and the next task gets the slot.
        let first = queues.try_enter(&k).unwrap().owned();
        let Ok(Found::Wait(queue)) = queues.find(&k, true) else {
            panic!("the slot is held: the second task waits");
        };
        let waiter = Waiter {
            queues: &queues,
            keys: &k,
            queue: Some(queue),
        };
        drop(first);
        assert_eq!(queues.open_lines(), 1, "handed over, not yet taken");
        drop(waiter);
        assert_eq!(queues.open_lines(), 0);
        drop(queues.try_enter(&k).unwrap());
        assert_eq!(queues.open_lines(), 0);
    }

    #[tokio::test]
    async fn the_line_is_bounded() {
        let queues = LocalQueues::new(1);
        let k = StoredKeys::new("lock", "k").unwrap();
        let _held = queues.try_enter(&k).unwrap().owned();
        let deadline = Instant::now() + Duration::from_secs(5);
        let (q, k2) = (Arc::clone(&queues), k.clone());
        let waiter = tokio::spawn(async move { q.enter(&k2, deadline).await.map(drop) });
        while queues.waiting(&k) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(queues.enter(&k, deadline).await.unwrap_err(), NoSlot::Full);
        waiter.abort();
    }
}
