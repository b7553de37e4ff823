//! The process-local line in front of the store.
//!
//! Tasks of one process that want the same key line up FIFO here, and only
//! the one whose turn it is talks to the store; the others wait without
//! any traffic. A plain lock's holder keeps its turn while it holds the
//! lease, so when it releases, the next local task contends at once; the
//! turn passes on when the lease is released or lost. The other kinds hand
//! the turn on once granted (see `KindLines`).

use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, MutexGuard};

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::keys::{KeyMap, StoredKeys};
use crate::places::Place;
use crate::sharded::Sharded;

/// Why a task got no local turn.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoTurn {
    /// Another task of this process holds or is taking the key.
    Busy,
    /// The wait deadline passed in the local line.
    TimedOut,
    /// The line is at its bound.
    Full,
}

/// The local lines of one Locker, by lock (sharded).
#[derive(Debug)]
pub(crate) struct Lines {
    map: Sharded<LineMap>,
    max_waiters: usize,
}

/// The line of each key, present while a task holds or takes its turn:
/// `None` while nobody waits (the common case, which allocates nothing
/// beyond the map entry), else the line of waiters (or of a handed-over
/// turn not yet taken).
type LineMap = KeyMap<Option<Arc<Line>>>;

/// Waiters of one key, in FIFO order. The turn is the semaphore's one
/// permit; it is out (held, not in the semaphore) while a task has the
/// turn. Only the map and waiting tasks hold the `Arc`, so a strong count
/// of one means nobody waits.
#[derive(Debug)]
struct Line {
    turns: Semaphore,
    waiting: AtomicUsize,
}

/// The turn for one key, held while contending (and, for a plain lock,
/// while the lease is held); dropping it hands the turn to the next waiter or ends the line.
#[derive(Debug)]
pub(crate) struct Turn {
    lines: Arc<Lines>,
    keys: StoredKeys,
}

/// How a lease holds its process-local turn.
#[derive(Debug)]
pub(crate) enum HeldTurn {
    /// A turn that waited or contended on its own.
    Owned(Turn),
    /// The turn of the lease's keys in its Locker's lines, freed through
    /// the lines (no reference of its own to keep).
    InLine,
    /// None: every kind but the plain lock hands its turn on once granted.
    HandedOn,
    /// A fair request's place (it takes no turn: see [`Places`]).
    ///
    /// [`Places`]: crate::places::Places
    Placed(Place),
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.lines.leave(&self.keys);
    }
}

/// A turn just taken by [`Lines::try_enter`], borrowed from its
/// lines: freed if dropped, else handed on (to a lease that frees it
/// through its Lines, or as an owned [`Turn`]).
#[derive(Debug)]
pub(crate) struct FirstTurn<'a> {
    lines: &'a Arc<Lines>,
    keys: &'a StoredKeys,
    armed: bool,
}

impl FirstTurn<'_> {
    /// The turn as an owned value.
    pub(crate) fn owned(mut self) -> Turn {
        self.armed = false;
        self.lines.turn(self.keys)
    }

    /// The turn as the lease on these keys holds it: it passes it on
    /// through the Lines ([`Lines::leave`]).
    pub(crate) fn into_held(mut self) -> HeldTurn {
        self.armed = false;
        HeldTurn::InLine
    }
}

impl Drop for FirstTurn<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.lines.leave(self.keys);
        }
    }
}

/// A waiter's place in a line: counted while it waits; if it leaves
/// without the turn, it ends a line that nobody holds or waits in.
struct Waiter<'a> {
    lines: &'a Lines,
    keys: &'a StoredKeys,
    line: Option<Arc<Line>>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let Some(line) = self.line.take() else {
            return;
        };
        line.waiting.fetch_sub(1, Ordering::Relaxed);
        let mut lines = self.lines.shard(self.keys);
        // Only the map and this waiter know the line, and the turn sits
        // unclaimed in it (handed over as this waiter gave up): no one is
        // left to end the line.
        let abandoned = Arc::strong_count(&line) == 2 && line.turns.available_permits() == 1;
        // Let go while the shard is locked, so that a holder ending its
        // turn next sees that this waiter is gone.
        drop(line);
        if abandoned {
            lines.remove(self.keys);
        }
    }
}

/// What `enter` found under the shard lock.
enum Found {
    Turn,
    Wait(Arc<Line>),
}

impl Lines {
    pub(crate) fn new(max_waiters: usize) -> Arc<Self> {
        Arc::new(Lines {
            map: Sharded::default(),
            max_waiters,
        })
    }

    /// The shard holding the line of `keys`, locked.
    fn shard(&self, keys: &StoredKeys) -> MutexGuard<'_, LineMap> {
        self.map.lock_keys(keys)
    }

    fn turn(self: &Arc<Self>, keys: &StoredKeys) -> Turn {
        Turn {
            lines: Arc::clone(self),
            keys: keys.clone(),
        }
    }

    /// Takes the turn if it is free; else, if `join`, joins the line.
    fn find(self: &Arc<Self>, keys: &StoredKeys, join: bool) -> Result<Found, NoTurn> {
        let mut lines = self.shard(keys);
        let line = match lines.entry(keys.clone()) {
            Entry::Vacant(free) => {
                free.insert(None);
                return Ok(Found::Turn);
            }
            Entry::Occupied(line) => line.into_mut(),
        };
        if let Some(line) = line {
            // A turn handed over to a waiter that gave up.
            if let Ok(permit) = line.turns.try_acquire() {
                permit.forget();
                return Ok(Found::Turn);
            }
        }
        if !join {
            return Err(NoTurn::Busy);
        }
        let line = line.get_or_insert_with(|| {
            Arc::new(Line {
                turns: Semaphore::new(0),
                waiting: AtomicUsize::new(0),
            })
        });
        if line.waiting.load(Ordering::Relaxed) >= self.max_waiters {
            return Err(NoTurn::Full);
        }
        line.waiting.fetch_add(1, Ordering::Relaxed);
        Ok(Found::Wait(Arc::clone(line)))
    }

    /// Takes the turn for `keys` now, or says it is busy.
    pub(crate) fn try_enter<'a>(
        self: &'a Arc<Self>,
        keys: &'a StoredKeys,
    ) -> Result<FirstTurn<'a>, NoTurn> {
        self.find(keys, false)?;
        Ok(FirstTurn {
            lines: self,
            keys,
            armed: true,
        })
    }

    /// Gives up the turn for `keys`: hands it to the next waiter, or ends
    /// the line.
    pub(crate) fn leave(&self, keys: &StoredKeys) {
        let mut lines = self.shard(keys);
        // Taken out at once: the common case is a line nobody waits in.
        if let Some((stored, Some(line))) = lines.remove_entry(keys)
            && Arc::strong_count(&line) > 1
        {
            // Somebody waits: hand the turn over and keep the line.
            line.turns.add_permits(1);
            lines.insert(stored, Some(line));
        }
    }

    /// Waits in line (FIFO) for the turn for `keys` until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the line and takes no turn.
    pub(crate) async fn enter(
        self: &Arc<Self>,
        keys: &StoredKeys,
        deadline: Instant,
    ) -> Result<Turn, NoTurn> {
        let line = match self.find(keys, true)? {
            Found::Turn => return Ok(self.turn(keys)),
            Found::Wait(line) => line,
        };
        let mut waiter = Waiter {
            lines: self,
            keys,
            line: Some(line),
        };
        let turns = &waiter.line.as_ref().expect("set above").turns;
        let acquired = match tokio::time::timeout_at(deadline, turns.acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                true
            }
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => false,
        };
        if !acquired {
            return Err(NoTurn::TimedOut);
        }
        // Holders keep no reference to the line: its count says who waits.
        if let Some(line) = waiter.line.take() {
            line.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(self.turn(keys))
    }

    /// Tasks waiting in line for `keys` (not counting the head).
    pub(crate) fn waiting(&self, keys: &StoredKeys) -> usize {
        match self.shard(keys).get(keys) {
            Some(Some(line)) => line.waiting.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// Lines currently open (keys held or awaited by this process).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn open_lines(&self) -> usize {
        self.map.sum(LineMap::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::Duration;

    #[tokio::test]
    async fn lines_are_fifo_and_vanish_when_empty() {
        let lines = Lines::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        let first = lines.try_enter(&k).unwrap().owned();
        assert_eq!(lines.try_enter(&k).unwrap_err(), NoTurn::Busy);
        let deadline = Instant::now() + Duration::from_secs(5);
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..3 {
            let (q, order, mine) = (Arc::clone(&lines), Arc::clone(&order), k.clone());
            tasks.push(tokio::spawn(async move {
                let turn = q.enter(&mine, deadline).await.unwrap();
                order.lock().unwrap().push(i);
                drop(turn);
            }));
            // Let each task join the line before the next one.
            while lines.waiting(&k) <= i {
                tokio::task::yield_now().await;
            }
        }
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
        assert_eq!(lines.open_lines(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_ends_with_its_last_holder_or_waiter() {
        let lines = Lines::new(10);
        let k = StoredKeys::new("lock", "k").unwrap();
        // A waiter that times out leaves the holder's line in place.
        let first = lines.try_enter(&k).unwrap().owned();
        let soon = Instant::now() + Duration::from_millis(50);
        assert_eq!(lines.enter(&k, soon).await.unwrap_err(), NoTurn::TimedOut);
        assert_eq!((lines.open_lines(), lines.waiting(&k)), (1, 0));
        drop(first);
        assert_eq!(lines.open_lines(), 0);
        // The turn is handed to a waiter that gives up before taking it:
        // the waiter ends the line, and the next task gets the turn.
        let first = lines.try_enter(&k).unwrap().owned();
        let Ok(Found::Wait(line)) = lines.find(&k, true) else {
            panic!("the turn is held: the second task waits");
        };
        let waiter = Waiter {
            lines: &lines,
            keys: &k,
            line: Some(line),
        };
        drop(first);
        assert_eq!(lines.open_lines(), 1, "handed over, not yet taken");
        drop(waiter);
        assert_eq!(lines.open_lines(), 0);
        drop(lines.try_enter(&k).unwrap());
        assert_eq!(lines.open_lines(), 0);
    }

    #[tokio::test]
    async fn the_line_is_bounded() {
        let lines = Lines::new(1);
        let k = StoredKeys::new("lock", "k").unwrap();
        let _held = lines.try_enter(&k).unwrap().owned();
        let deadline = Instant::now() + Duration::from_secs(5);
        let (q, k2) = (Arc::clone(&lines), k.clone());
        let waiter = tokio::spawn(async move { q.enter(&k2, deadline).await.map(drop) });
        while lines.waiting(&k) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(lines.enter(&k, deadline).await.unwrap_err(), NoTurn::Full);
        waiter.abort();
    }
}
