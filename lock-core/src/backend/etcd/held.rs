//! What this backend has in etcd: the entry of each lock it holds and of
//! each ticket it waits with, the lease it is under and when it runs out.
//!
//! Many locks share one etcd lease, which renewals keep alive as long as
//! any of them is renewed. A lock no longer renewed (its watchdog is off or
//! stopped at `max_hold`, or its guard was leaked) must still end at its
//! ttl, as it does on Redis: the reaper deletes each entry whose ttl ran
//! out here. A process that stops altogether loses them with the lease.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use tokio::sync::Notify;
use tokio::time::{Instant, sleep_until};

use super::errors::bounded;
use super::leases::Lease;
use super::rounds::Round;
use crate::store_error::StoreError;

/// How long a failed reaping waits before it is tried again.
const REAP_RETRY: Duration = Duration::from_secs(1);

/// Entries by ticket name (`<base><owner>`, which names one acquisition).
#[derive(Default)]
pub(super) struct Held {
    table: Mutex<Table>,
    /// An entry was added (the reaper may have to wake sooner), or the
    /// backend is gone.
    pub(super) changed: Arc<Notify>,
}

#[derive(Default)]
struct Table {
    entries: HashMap<String, Entry>,
    /// Entries the reaper took out to delete: not to be granted meanwhile.
    reaping: HashSet<String>,
}

/// One entry in etcd.
#[derive(Clone)]
pub(super) struct Entry {
    /// Its etcd key.
    pub(super) stored: String,
    /// Its create revision: the lock's token.
    pub(super) revision: i64,
    pub(super) lease: Arc<Lease>,
    /// When it runs out unless renewed (or asked for again, for a ticket).
    pub(super) expires: Instant,
}

impl Held {
    /// Records `entry` under `name`, unless the reaper is deleting the
    /// entry of that name (`false`).
    pub(super) fn put(&self, name: String, entry: Entry) -> bool {
        let mut table = self.table();
        if table.reaping.contains(&name) {
            return false;
        }
        table.entries.insert(name, entry);
        drop(table);
        self.changed.notify_one();
        true
    }

    /// Extends the entry `name` to its lease's ttl (the one granted) from
    /// now, if there is one.
    pub(super) fn extend(&self, name: &str) -> Option<Entry> {
        let mut table = self.table();
        let entry = table.entries.get_mut(name)?;
        entry.expires = Instant::now() + entry.lease.ttl;
        Some(entry.clone())
    }

    /// The entry `name`, if there is one.
    pub(super) fn get(&self, name: &str) -> Option<Entry> {
        self.table().entries.get(name).cloned()
    }

    /// Takes out the entry `name`.
    pub(super) fn take(&self, name: &str) -> Option<Entry> {
        self.table().entries.remove(name)
    }

    /// Whether the reaper is deleting the entry `name`.
    pub(super) fn is_reaping(&self, name: &str) -> bool {
        self.table().reaping.contains(name)
    }

    /// Entries held or waited with.
    pub(super) fn len(&self) -> usize {
        let table = self.table();
        table.entries.len() + table.reaping.len()
    }

    /// When the next entry runs out.
    fn next(&self) -> Option<Instant> {
        self.table().entries.values().map(|e| e.expires).min()
    }

    /// Takes out the entries whose time ran out, to be deleted.
    fn due(&self, now: Instant) -> Vec<(String, Entry)> {
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
    fn reaped(&self, name: String, entry: Entry, deleted: bool) {
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

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

// The reaper waits on `changed` with no strong reference: wake it to end.
impl Drop for Held {
    fn drop(&mut self) {
        self.changed.notify_one();
    }
}

/// Deletes the entry `stored` if it is still the one of `revision`;
/// whether it was.
pub(super) async fn delete_entry(
    client: &Client,
    timeout: Duration,
    stored: &str,
    revision: i64,
) -> Result<bool, StoreError> {
    let txn = Txn::new()
        .when([Compare::create_revision(stored, CompareOp::Equal, revision)])
        .and_then([TxnOp::delete(stored, None)]);
    let reply = bounded(timeout, true, client.clone().txn(txn)).await?;
    Ok(reply.succeeded())
}

/// Reaps the entries of `held` whose time ran out, until the backend that
/// owns it is gone.
pub(super) async fn reap(
    held: Weak<Held>,
    changed: Arc<Notify>,
    client: Client,
    timeout: Duration,
) {
    loop {
        let notified = changed.notified();
        let next = {
            let Some(held) = held.upgrade() else { return };
            for (name, entry) in held.due(Instant::now()) {
                tracing::debug!(entry = %entry.stored, "lease ran out unrenewed; deleting its entry");
                let deleted = delete_entry(&client, timeout, &entry.stored, entry.revision).await;
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

/// Whether held entries still stand, for renewals: one read for every
/// renewal due at once (at most etcd's default of 128 operations per
/// transaction).
pub(super) struct Standing {
    pub(super) client: Client,
    pub(super) timeout: Duration,
}

/// Most operations etcd takes in one transaction by default.
pub(super) const MAX_TXN_OPS: usize = 128;

impl Round for Standing {
    /// An entry's key and create revision.
    type Ask = (String, i64);
    type Answer = Result<bool, StoreError>;

    async fn run(&mut self, asks: Vec<(String, i64)>) -> Vec<Self::Answer> {
        let gets = asks.iter().map(|(stored, _)| {
            TxnOp::get(stored.as_str(), Some(GetOptions::new().with_keys_only()))
        });
        let txn = Txn::new().and_then(gets.collect::<Vec<_>>());
        match bounded(self.timeout, false, self.client.txn(txn)).await {
            Ok(reply) => reply
                .op_responses()
                .into_iter()
                .zip(&asks)
                .map(|(answer, (_, revision))| {
                    Ok(matches!(answer, TxnOpResponse::Get(got)
                        if got.kvs().first().is_some_and(|kv| kv.create_revision() == *revision)))
                })
                .collect(),
            Err(err) => asks.iter().map(|_| Err(err.clone())).collect(),
        }
    }
}
