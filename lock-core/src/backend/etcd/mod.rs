//! The etcd backend: each acquisition puts an entry under the lock's
//! prefix, `<namespace>:{<key>}:<kind>/`, under a lease of this backend,
//! and holds when the entries created before it allow (see [`queue`]). The
//! fencing token is the revision of the transaction that granted it
//! (the entry is written again by each ask): etcd's revision only ever
//! grows, across leader changes too.
//!
//! One lease per ttl (in whole seconds) is shared by every lock of that
//! ttl ([`leases`]): renewals that come due together share one keep-alive
//! per lease and one read of up to 128 entries, not a call per lock.
//! Waiters watch the entry before theirs ([`waiting`]). Entries no longer
//! renewed are deleted at their ttl by the shared reaper
//! (`queued`).

mod acquire;
mod connect;
mod errors;
mod held_checks;
mod inspect;
mod leases;
mod queue;
mod segments;
mod tombstones;
mod waiting;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_client::Client;
use tokio::time::Instant;

use self::errors::lease_gone;
use self::held_checks::{HeldCheck, MAX_TXN_OPS, delete_entry};
use self::leases::{Lease, Leases};
use self::queue::Names;
use self::segments::find_segment;
use super::queued::{self, Entry, Held, LazyBatchRunner};
use super::{Attempt, LockStore, Pattern, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;

/// Leases in etcd (feature `etcd`): made by
/// [`LockerBuilder::etcd`](crate::LockerBuilder::etcd) or an `etcd://` URL.
///
/// Every kind of lock runs on it. Grants are fair (in the order entries
/// were created) for every kind, the plain lock included. A lease's ttl is
/// whole seconds, at least etcd's minimum (by default 2 s: 1.5 times the
/// election timeout, rounded up): a lock asking for less is granted that,
/// and its guard's deadline and renewals follow the granted ttl.
#[derive(Clone)]
pub struct EtcdBackend {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EtcdBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdBackend")
            .field("store", &crate::backend::LockStore::describe(self))
            .finish_non_exhaustive()
    }
}

struct Shared {
    client: Client,
    timeout: Duration,
    leases: Leases,
    held: Arc<Held<Lease>>,
    /// The task that checks held entries for renewals.
    held_checks: LazyBatchRunner<HeldCheck>,
    /// The reaper task (see [`held`]), likewise.
    reaper: Mutex<Option<tokio::task::AbortHandle>>,
    description: String,
}

impl EtcdBackend {
    fn new(client: Client, timeout: Duration, description: String) -> Self {
        EtcdBackend {
            shared: Arc::new(Shared {
                leases: Leases::new(client.clone(), timeout),
                client,
                timeout,
                held: Arc::default(),
                held_checks: LazyBatchRunner::new(MAX_TXN_OPS),
                reaper: Mutex::default(),
                description,
            }),
        }
    }

    /// Starts the reaper on this runtime if it is not running.
    fn reaper(&self) {
        let mut reaper = self
            .shared
            .reaper
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reaper.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let shared = &self.shared;
        let (client, timeout) = (shared.client.clone(), shared.timeout);
        let held = Arc::downgrade(&shared.held);
        let weak = held.clone();
        let delete: queued::Delete<Lease> = Box::new(move |entry| {
            let (client, held) = (client.clone(), weak.clone());
            Box::pin(async move {
                match held.upgrade() {
                    Some(held) => remove(&client, timeout, &held, &entry).await,
                    None => Ok(false),
                }
            })
        });
        let task = tokio::spawn(queued::reap(held, Arc::clone(&shared.held.changed), delete));
        *reaper = Some(task.abort_handle());
    }
}

/// Deletes a held entry, or a tombstone whose time is up: an entry whose put
/// went unanswered is retired (see [`tombstones`]). Whether it was there.
async fn remove(
    client: &Client,
    timeout: Duration,
    held: &Held<Lease>,
    entry: &Entry<Lease>,
) -> Result<bool, StoreError> {
    if tombstones::is_tombstone(&entry.stored) {
        tombstones::delete_tombstone(client, timeout, &entry.stored, entry.revision).await
    } else if entry.revision == 0 {
        tombstones::retire(client, timeout, held, &entry.stored, entry).await
    } else {
        delete_entry(client, timeout, &entry.stored, entry.revision).await
    }
}

/// The error of an acquire whose entry the reaper is deleting (its ttl
/// ran out before it was asked for again): asked again, it is put anew.
fn reaping() -> StoreError {
    StoreError::not_applied("the entry ran out and is being deleted")
}

/// An entry put or found, and whether it holds.
struct Placed {
    stored: String,
    revision: i64,
    token: i64,
    lease: i64,
    holds: bool,
}

impl From<segments::Segment> for Placed {
    fn from(segment: segments::Segment) -> Self {
        Placed {
            stored: segment.stored,
            revision: segment.revision,
            token: segment.revision,
            lease: segment.lease,
            holds: true,
        }
    }
}

/// Why one try under a lease failed.
enum TryFailed {
    /// The lease is gone: try once more under a new one.
    LeaseGone,
    Store(StoreError),
}

impl From<StoreError> for TryFailed {
    fn from(err: StoreError) -> Self {
        match lease_gone(&err) {
            true => TryFailed::LeaseGone,
            false => TryFailed::Store(err),
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(task) = self
            .reaper
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

impl LockStore for EtcdBackend {
    fn supports(&self, _: LockKind) -> bool {
        true
    }

    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::new(async move { self.enqueue(keys, kind, owner, ttl).await })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        _ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let started = Instant::now();
            let names = Names::of(keys, kind, owner);
            let Some(entry) = self.shared.held.extend(&names.entry) else {
                return Ok(false);
            };
            self.reaper();
            let shared = &self.shared;
            let held_check = || HeldCheck {
                client: shared.client.clone(),
                timeout: shared.timeout,
            };
            let ask = (entry.stored.clone(), entry.revision);
            let check = shared.held_checks.ask(ask, shared.timeout, held_check);
            let (alive, stands) = tokio::join!(entry.lease.confirm_since(started), check);
            match (alive, stands) {
                (Ok(true), Ok(true)) => Ok(true),
                // A lease or entry that is gone is gone, whatever the other answer.
                (Ok(false), _) | (_, Ok(false)) => Ok(false),
                (Err(err), _) | (_, Err(err)) => Err(err),
            }
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let shared = &self.shared;
            let names = Names::of(keys, kind, owner);
            let taken = shared.held.take(&names.entry);
            if let Some(entry) = taken {
                let deleted = remove(&shared.client, shared.timeout, &shared.held, &entry).await;
                if deleted.is_err() {
                    // Left to the reaper, which tries again at once.
                    let expires = Instant::now();
                    shared.held.put(names.entry, Entry { expires, ..entry });
                    self.reaper();
                }
                return deleted;
            }
            let (stored, revision) = match kind {
                LockKind::Segment { .. } => {
                    match find_segment(&shared.client, shared.timeout, &names.base, owner).await? {
                        Some((stored, revision)) => (stored, Some(revision)),
                        None => return Ok(false),
                    }
                }
                // The entry's name is the owner's own.
                _ => (names.entry, None),
            };
            match revision {
                Some(revision) => {
                    delete_entry(&shared.client, shared.timeout, &stored, revision).await
                }
                None => {
                    let mut client = shared.client.clone();
                    let deleted =
                        errors::bounded(shared.timeout, true, client.delete(stored, None)).await?;
                    Ok(deleted.deleted() > 0)
                }
            }
        })
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(async move {
            let shared = &self.shared;
            let (client, timeout) = (shared.client.clone(), shared.timeout);
            let names = Names::of(keys, kind, queued_owner.unwrap_or(""));
            let entry = queued_owner.and_then(|_| shared.held.get(&names.entry));
            match entry {
                Some(entry) => {
                    waiting::wait_ahead(client, timeout, names, kind, entry.revision).await
                }
                None => waiting::changes_under(client, timeout, names.ahead(kind)).await,
            }
        })
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::new(self.inspection_of(keys))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::new(self.held_keys_matching(namespace, pattern))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::new(self.force_release_all(keys))
    }

    fn describe(&self) -> String {
        self.shared.description.clone()
    }
}
