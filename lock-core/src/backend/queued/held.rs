//! What a backend has in its store: the entry of each lock it holds and of
//! each queue entry it waits with, the lease it is under and when it runs out.
//!
//! Many locks share one lease (an etcd lease, a ZooKeeper session), which
//! stays alive as long as any of them is renewed. A lock no longer renewed
//! (its watchdog is off or stopped at `max_hold`, or its guard was leaked)
//! must still end at its ttl, as it does on Redis: the reaper deletes each
//! entry whose ttl ran out here. A process that stops altogether loses them
//! with the lease.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use crate::error::StoreError;
use futures_util::future::BoxFuture;

/// A lease entries are kept under.
pub(crate) trait Leased: Send + Sync + 'static {
    /// The ttl the store granted.
    fn ttl(&self) -> Duration;
}

/// How long a failed reaping waits before it is tried again.
const REAP_RETRY: Duration = Duration::from_secs(1);

/// Entries by acquisition name (`<base><owner>`).
pub(crate) struct Held<L> {
    table: Mutex<Table<L>>,
    /// An entry was added (the reaper may have to wake sooner), or the
    /// backend is gone.
    pub(crate) changed: Arc<Notify>,
}

struct Table<L> {
    entries: HashMap<String, Entry<L>>,
    /// Entries the reaper took out to delete: not to be granted meanwhile.
    reaping: HashSet<String>,
}

/// One entry in the store.
pub(crate) struct Entry<L> {
    /// Its key or path.
    pub(crate) stored: String,
    /// Its create revision (etcd) or czxid (ZooKeeper), which tells it from
    /// a later entry of the same name; 0 while its put has no answer. (An
    /// etcd mark's: the revision it was last written at.)
    pub(crate) revision: i64,
    pub(crate) lease: Arc<L>,
    /// When it runs out unless renewed (or asked for again, for a queue entry).
    pub(crate) expires: Instant,
}

impl<L> Clone for Entry<L> {
    fn clone(&self) -> Self {
        Entry {
            stored: self.stored.clone(),
            revision: self.revision,
            lease: Arc::clone(&self.lease),
            expires: self.expires,
        }
    }
}

impl<L> Default for Held<L> {
    fn default() -> Self {
        Held {
            table: Mutex::new(Table {
                entries: HashMap::new(),
                reaping: HashSet::new(),
            }),
            changed: Arc::default(),
        }
    }
}

impl<L: Leased> Held<L> {
    /// Records `entry` under `name`, unless the reaper is deleting the
    /// entry of that name (`false`).
    pub(crate) fn put(&self, name: String, entry: Entry<L>) -> bool {
        let mut table = self.table();
        if table.reaping.contains(&name) {
            return false;
        }
        table.entries.insert(name, entry);
        drop(table);
        self.changed.notify_one();
        true
    }

    /// Records `entry` under `name` even while the reaper deletes an older
    /// entry of that name, which it then leaves in place (see `reaped`).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub(crate) fn record(&self, name: String, entry: Entry<L>) {
        self.table().entries.insert(name, entry);
        self.changed.notify_one();
    }

    /// Extends the entry `name` to its lease's ttl (the one granted) from
    /// now, if there is one.
    pub(crate) fn extend(&self, name: &str) -> Option<Entry<L>> {
        let mut table = self.table();
        let entry = table.entries.get_mut(name)?;
        entry.expires = Instant::now() + entry.lease.ttl();
        Some(entry.clone())
    }

    /// The entry `name`, if there is one.
    pub(crate) fn get(&self, name: &str) -> Option<Entry<L>> {
        self.table().entries.get(name).cloned()
    }

    /// Takes out the entry `name`.
    pub(crate) fn take(&self, name: &str) -> Option<Entry<L>> {
        self.table().entries.remove(name)
    }

    /// Whether the reaper is deleting the entry `name`.
    pub(crate) fn is_reaping(&self, name: &str) -> bool {
        self.table().reaping.contains(name)
    }

    /// When the next entry runs out.
    fn next(&self) -> Option<Instant> {
        self.table().entries.values().map(|e| e.expires).min()
    }

    /// Takes out the entries whose time ran out, to be deleted.
    fn due(&self, now: Instant) -> Vec<(String, Entry<L>)> {
        let mut table = self.table();
        let due_names: Vec<String> = table
            .entries
            .iter()
            .filter(|(_, entry)| entry.expires <= now)
            .map(|(name, _)| name.clone())
            .collect();
        let mut due = Vec::with_capacity(due_names.len());
        for name in due_names {
            if let Some(entry) = table.entries.remove(&name) {
                table.reaping.insert(name.clone());
                due.push((name, entry));
            }
        }
        due
    }

    /// The reaper is done with `name`: deleted, or (if not) kept to be
    /// tried again shortly.
    fn reaped(&self, name: String, entry: Entry<L>, deleted: bool) {
        let mut table = self.table();
        table.reaping.remove(&name);
        if !deleted {
            let expires = Instant::now() + REAP_RETRY;
            table
                .entries
                .entry(name)
                .or_insert(Entry { expires, ..entry });
        }
    }

    fn table(&self) -> MutexGuard<'_, Table<L>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

// The reaper waits on `changed` with no strong reference: wake it to end.
impl<L> Drop for Held<L> {
    fn drop(&mut self) {
        self.changed.notify_one();
    }
}

/// Deletes one entry in the store: whether it was there.
pub(crate) type Delete<L> =
    Box<dyn Fn(Entry<L>) -> BoxFuture<'static, Result<bool, StoreError>> + Send + Sync>;

/// Reaps the entries of `held` whose time ran out with `delete`, until the
/// backend that owns it is gone.
pub(crate) async fn reap<L: Leased>(held: Weak<Held<L>>, changed: Arc<Notify>, delete: Delete<L>) {
    loop {
        let notified = changed.notified();
        let next = {
            let Some(held) = held.upgrade() else { return };
            for (name, entry) in held.due(Instant::now()) {
                tracing::debug!(entry = %entry.stored, "lease ran out unrenewed; deleting its entry");
                let deleted = delete(entry.clone()).await;
                if let Err(err) = &deleted {
                    tracing::debug!(entry = %entry.stored, error = %err, "deleting failed; trying again");
                }
                held.reaped(name, entry, deleted.is_ok());
            }
            held.next()
        };
        match next {
            Some(at) => {
                tokio::select! {
                    _ = sleep_until(at) => {}
                    _ = notified => {}
                }
            }
            None => notified.await,
        }
    }
}
