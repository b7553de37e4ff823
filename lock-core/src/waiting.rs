//! Process-local queueing in front of the store (the seed's local lock).
//!
//! Tasks of one process that want the same key line up FIFO here, and only
//! the head of the line talks to the store; the others wait without any
//! traffic. A task keeps its slot while it holds the lease, so when it
//! releases, the next local task contends at once. The slot is freed when
//! the lease is released or lost.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};

use tokio::sync::Semaphore;
use tokio::time::Instant;

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

/// The local lines of one Locker, by stored lease key (sharded).
#[derive(Debug)]
pub(crate) struct LocalQueues {
    lines: Sharded<Lines>,
    max_waiters: usize,
}

type Lines = HashMap<Arc<str>, Arc<Line>>;

#[derive(Debug)]
struct Line {
    /// One permit: the head-of-line slot.
    gate: Semaphore,
    waiting: AtomicUsize,
}

/// A place in a line; removes the line when the last place goes.
#[derive(Debug)]
struct Place {
    queues: Arc<LocalQueues>,
    key: Arc<str>,
    line: Arc<Line>,
}

/// The head-of-line slot for one key, held while contending and while the
/// lease is held.
#[derive(Debug)]
pub(crate) struct LocalSlot {
    place: Place,
}

impl LocalSlot {
    /// Takes the slot whose permit was just acquired and forgotten.
    fn of(place: Place, permit: tokio::sync::SemaphorePermit<'_>) -> Self {
        permit.forget();
        LocalSlot { place }
    }
}

impl Drop for LocalSlot {
    fn drop(&mut self) {
        // Hand the gate on before the place checks whether the line is empty.
        self.place.line.gate.add_permits(1);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut lines = self.queues.lines(&self.key);
        // The map and this place are the only references: nobody else waits.
        if Arc::strong_count(&self.line) == 2 {
            lines.remove(&self.key);
        }
    }
}

/// Counts a waiter for as long as it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl LocalQueues {
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(LocalQueues {
            lines: Sharded::default(),
            max_waiters,
        })
    }

    /// The shard holding the line of `key`, locked.
    fn lines(&self, key: &str) -> MutexGuard<'_, Lines> {
        self.lines.lock_key(key)
    }

    fn place(self: &Arc<Self>, key: &str) -> Place {
        let mut lines = self.lines(key);
        let (key, line) = match lines.get_key_value(key) {
            Some((key, line)) => (Arc::clone(key), Arc::clone(line)),
            None => {
                let key: Arc<str> = Arc::from(key);
                let line = Arc::new(Line {
                    gate: Semaphore::new(1),
                    waiting: AtomicUsize::new(0),
                });
                lines.insert(Arc::clone(&key), Arc::clone(&line));
                (key, line)
            }
        };
        Place {
            queues: Arc::clone(self),
            key,
            line,
        }
    }

    /// Takes the slot for `key` now, or says it is busy.
    pub(crate) fn try_enter(self: &Arc<Self>, key: &str) -> Result<LocalSlot, NoSlot> {
        let place = self.place(key);
        let line = Arc::clone(&place.line);
        let permit = line.gate.try_acquire().map_err(|_| NoSlot::Busy)?;
        Ok(LocalSlot::of(place, permit))
    }

    /// Waits in line (FIFO) for the slot for `key` until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the line and takes no slot.
    pub(crate) async fn enter(
        self: &Arc<Self>,
        key: &str,
        deadline: Instant,
    ) -> Result<LocalSlot, NoSlot> {
        let place = self.place(key);
        let line = Arc::clone(&place.line);
        if let Ok(permit) = line.gate.try_acquire() {
            return Ok(LocalSlot::of(place, permit));
        }
        if place.line.waiting.fetch_add(1, Ordering::Relaxed) >= self.max_waiters {
            place.line.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(NoSlot::Full);
        }
        let waiting = Waiting(&line.waiting);
        let permit = tokio::time::timeout_at(deadline, line.gate.acquire()).await;
        drop(waiting);
        match permit {
            Ok(Ok(permit)) => Ok(LocalSlot::of(place, permit)),
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => Err(NoSlot::TimedOut),
        }
    }

    /// Tasks waiting in line for `key` (not counting the head).
    pub(crate) fn waiting(&self, key: &str) -> usize {
        self.lines(key)
            .get(key)
            .map_or(0, |line| line.waiting.load(Ordering::Relaxed))
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
        let first = queues.try_enter("k").unwrap();
        assert_eq!(queues.try_enter("k").unwrap_err(), NoSlot::Busy);
        let deadline = Instant::now() + Duration::from_secs(5);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (q, order) = (Arc::clone(&queues), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let slot = q.enter("k", deadline).await.unwrap();
                order.lock().unwrap().push(i);
                drop(slot);
            }));
            // Let each task join the line before the next one.
            while queues.lines("k")["k"].waiting.load(Ordering::Relaxed) <= i {
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

    #[tokio::test]
    async fn the_line_is_bounded() {
        let queues = LocalQueues::new(1);
        let _held = queues.try_enter("k").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let q = Arc::clone(&queues);
        let waiter = tokio::spawn(async move { q.enter("k", deadline).await.map(drop) });
        while queues.lines("k")["k"].waiting.load(Ordering::Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(queues.enter("k", deadline).await.unwrap_err(), NoSlot::Full);
        waiter.abort();
    }
}
