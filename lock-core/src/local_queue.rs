//! The process-local queue in front of the store.
//!
//! Tasks of one process that want the same key queue up FIFO here, and only
//! the one at the front talks to the store; the others wait without
//! any traffic. A plain lock's holder keeps the front while it holds the
//! lease, so when it releases, the next local task contends at once; the
//! front passes on when the lease is released or lost. The other kinds hand
//! the front on once granted (see `KindQueues`).

use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::backend::key_shards::KeyShards;
use crate::backend::stored_keys::{KeyMap, StoredKeys};
use crate::fair_waiters::FairPlace;

/// Why a task is not at the front of its local queue.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoFront {
    /// Another task of this process holds or is taking the key.
    Busy,
    /// The wait deadline passed in the local queue.
    TimedOut,
    /// The queue is at its bound.
    Full,
}

/// The local queues of one Locker, by lock (sharded).
#[derive(Debug)]
pub(crate) struct LocalQueues {
    map: KeyShards<QueueMap>,
    max_waiters: usize,
}

/// The queue of each key, present while a task holds or takes the front:
/// `None` while nobody waits (the common case, which allocates nothing
/// beyond the map entry), else the queue of waiters (or of a handed-over
/// front not yet taken).
type QueueMap = KeyMap<Option<Arc<KeyQueue>>>;

/// Waiters of one key, in FIFO order. The front is the semaphore's one
/// permit; it is out (held, not in the semaphore) while a task has the
/// front. Only the map and waiting tasks hold the `Arc`, so a strong count
/// of one means nobody waits.
#[derive(Debug)]
struct KeyQueue {
    front: Semaphore,
    waiting: AtomicUsize,
}

/// The front for one key, held while contending (and, for a plain lock,
/// while the lease is held); dropping it hands the front to the next waiter or ends the queue.
#[derive(Debug)]
pub(crate) struct Front {
    queues: Arc<LocalQueues>,
    keys: StoredKeys,
}

/// How a lease holds its process-local front.
#[derive(Debug)]
pub(crate) enum HeldFront {
    /// A front that waited or contended on its own.
    Owned(Front),
    /// The front of the lease's keys in its Locker's queues, freed through
    /// the queues (no reference of its own to keep).
    InQueue,
    /// None: every kind but the plain lock hands the front on once granted.
    HandedOn,
    /// A fair request's place (it does not queue locally: see [`FairWaiters`]).
    ///
    /// [`FairWaiters`]: crate::fair_waiters::FairWaiters
    Placed(FairPlace),
}

impl Drop for Front {
    fn drop(&mut self) {
        self.queues.leave(&self.keys);
    }
}

/// A front just taken by [`LocalQueues::try_enter`], borrowed from its
/// queues: freed if dropped, else handed on (to a lease that frees it
/// through its queues, or as an owned [`Front`]).
#[derive(Debug)]
pub(crate) struct FrontTaken<'a> {
    queues: &'a Arc<LocalQueues>,
    keys: &'a StoredKeys,
    armed: bool,
}

impl FrontTaken<'_> {
    /// The front as an owned value.
    pub(crate) fn owned(mut self) -> Front {
        self.armed = false;
        self.queues.front(self.keys)
    }

    /// The front as the lease on these keys holds it: it passes it on
    /// through the queues ([`LocalQueues::leave`]).
    pub(crate) fn into_held(mut self) -> HeldFront {
        self.armed = false;
        HeldFront::InQueue
    }
}

impl Drop for FrontTaken<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.queues.leave(self.keys);
        }
    }
}

/// A waiter's place in a queue: counted while it waits; if it leaves
/// without the front, it ends a queue that nobody holds or waits in.
struct Waiter<'a> {
    queues: &'a LocalQueues,
    keys: &'a StoredKeys,
    queue: Option<Arc<KeyQueue>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let Some(queue) = self.queue.take() else {
            return;
        };
        queue.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut queues = self.queues.shard(self.keys);
        // Only the map and this waiter know the queue, and the front sits
        // unclaimed in it (handed over as this waiter gave up): no one is
        // left to end the queue.
        let abandoned = Arc::strong_count(&queue) == 2 && queue.front.available_permits() == 1;
        // Let go while the shard is locked, so that a holder giving up the
        // front next sees that this waiter is gone.
        drop(queue);
        if abandoned {
            queues.remove(self.keys);
        }
    }
}

/// What `enter` found under the shard lock.
enum Found {
    Front,
    Wait(Arc<KeyQueue>),
}

impl LocalQueues {
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(LocalQueues {
            map: KeyShards::default(),
            max_waiters,
        })
    }

    /// The shard holding the queue of `keys`, locked.
    fn shard(&self, keys: &StoredKeys) -> MutexGuard<'_, QueueMap> {
        self.map.lock_keys(keys)
    }

    fn front(self: &Arc<Self>, keys: &StoredKeys) -> Front {
        Front {
            queues: Arc::clone(self),
            keys: keys.clone(),
        }
    }

    /// Takes the front if it is free; else, if `join`, joins the queue.
    fn find(self: &Arc<Self>, keys: &StoredKeys, join: bool) -> Result<Found, NoFront> {
        let mut queues = self.shard(keys);
        let queue = match queues.entry(keys.clone()) {
            Entry::Vacant(free) => {
                free.insert(None);
                return Ok(Found::Front);
            }
            Entry::Occupied(queue) => queue.into_mut(),
        };
        if let Some(queue) = queue {
            // A front handed over to a waiter that gave up.
            if let Ok(permit) = queue.front.try_acquire() {
                permit.forget();
                return Ok(Found::Front);
            }
        }
        if !join {
            return Err(NoFront::Busy);
        }
        let queue = queue.get_or_insert_with(|| {
            Arc::new(KeyQueue {
                front: Semaphore::new(0),
                waiting: AtomicUsize::new(0),
            })
        });
        if queue.waiting.load(Ordering::Relaxed) >= self.max_waiters {
            return Err(NoFront::Full);
        }
        queue.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(Found::Wait(Arc::clone(queue)))
    }

    /// Takes the front for `keys` now, or says it is busy.
    pub(crate) fn try_enter<'a>(
        self: &'a Arc<Self>,
        keys: &'a StoredKeys,
    ) -> Result<FrontTaken<'a>, NoFront> {
        self.find(keys, false)?;
        Ok(FrontTaken {
            queues: self,
            keys,
            armed: true,
        })
    }

    /// Gives up the front for `keys`: hands it to the next waiter, or ends
    /// the queue.
    pub(crate) fn leave(&self, keys: &StoredKeys) {
        let mut queues = self.shard(keys);
        // Taken out at once: the common case is a queue nobody waits in.
        if let Some((stored, Some(queue))) = queues.remove_entry(keys)
            && Arc::strong_count(&queue) > 1
        {
            // Somebody waits: hand the front over and keep the queue.
            queue.front.add_permits(1);
            queues.insert(stored, Some(queue));
        }
    }

    /// Waits in queue (FIFO) for the front for `keys` until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the queue and never reaches the front.
    pub(crate) async fn enter(
        self: &Arc<Self>,
        keys: &StoredKeys,
        deadline: Instant,
    ) -> Result<Front, NoFront> {
        let queue = match self.find(keys, true)? {
            Found::Front => return Ok(self.front(keys)),
            Found::Wait(queue) => queue,
        };
        let mut waiter = Waiter {
            queues: self,
            keys,
            queue: Some(queue),
        };
        let front = &waiter.queue.as_ref().expect("set above").front;
        let acquired = match tokio::time::timeout_at(deadline, front.acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                true
            }
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => false,
        };
        if !acquired {
            return Err(NoFront::TimedOut);
        }
        // Holders keep no reference to the queue: its count says who waits.
        if let Some(queue) = waiter.queue.take() {
            queue.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(self.front(keys))
    }

    /// Tasks waiting in queue for `keys` (not counting the front).
    pub(crate) fn waiting(&self, keys: &StoredKeys) -> usize {
        match self.shard(keys).get(keys) {
            Some(Some(queue)) => queue.waiting.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// Queues currently open (keys held or awaited by this process).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn open_queues(&self) -> usize {
        self.map.sum(QueueMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[tokio::test]
    async fn queues_are_fifo_and_vanish_when_empty() {
        let queues = LocalQueues::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        let first = queues.try_enter(&k).unwrap().owned();
        assert_eq!(queues.try_enter(&k).unwrap_err(), NoFront::Busy);
        let deadline = Instant::now() + Duration::from_secs(5);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (q, order, mine) = (Arc::clone(&queues), Arc::clone(&order), k.clone());
            tasks.push(tokio::spawn(async move {
                let front = q.enter(&mine, deadline).await.unwrap();
                order.lock().unwrap().push(i);
                drop(front);
            }));
            // Let each task join the queue before the next one.
            while queues.waiting(&k) <= i {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(queues.open_queues(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queue_ends_with_its_last_holder_or_waiter() {
        let queues = LocalQueues::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        // A waiter that times out leaves the holder's queue in place.
        let first = queues.try_enter(&k).unwrap().owned();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(queues.enter(&k, soon).await.unwrap_err(), NoFront::TimedOut);
        assert_eq!((queues.open_queues(), queues.waiting(&k)), (1, 0));
        drop(first);
        assert_eq!(queues.open_queues(), 0);
        // The front is handed to a waiter that gives up before taking it:
        // the waiter ends the queue, and the next task gets the front.
        let first = queues.try_enter(&k).unwrap().owned();
        let Ok(Found::Wait(queue)) = queues.find(&k, true) else {
            panic!("the front is held: the second task waits");
        };
        let waiter = Waiter {
            queues: &queues,
            keys: &k,
            queue: Some(queue),
        };
        drop(first);
        assert_eq!(queues.open_queues(), 1, "handed over, not yet taken");
        drop(waiter);
        assert_eq!(queues.open_queues(), 0);
        drop(queues.try_enter(&k).unwrap());
        assert_eq!(queues.open_queues(), 0);
    }

    #[tokio::test]
    async fn the_queue_is_bounded() {
        let queues = LocalQueues::new(1);
        let k = StoredKeys::new("lock", "k").unwrap();
        let _held = queues.try_enter(&k).unwrap().owned();
        let deadline = Instant::now() + Duration::from_secs(5);
        let (q, k2) = (Arc::clone(&queues), k.clone());
        let waiter = tokio::spawn(async move { q.enter(&k2, deadline).await.map(drop) });
        while queues.waiting(&k) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(queues.enter(&k, deadline).await.unwrap_err(), NoFront::Full);
        waiter.abort();
    }
}
