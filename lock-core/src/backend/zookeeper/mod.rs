//! The ZooKeeper backend: each acquisition creates an ephemeral sequential
//! node `<owner>-<kind>-<sequence>` under the lock's parent node
//! (`/<namespace>:{<key>}:<kind>`, a container ZooKeeper removes once
//! empty), and holds when the nodes before it allow (see [`queue`]). The
//! fencing token is the zxid of a write to the node once its grant is
//! decided: ZooKeeper's transaction ids only grow, across leader changes
//! too, where a sequence number starts again with a new parent.
//!
//! The lease is the session: one per ttl, shared by every lock of that
//! ttl ([`sessions`]), kept alive by the client; its negotiated timeout is
//! the ttl granted. Renewals that come due together share one `sync` and
//! one read of a session's held nodes ([`held_checks`]). Waiters watch the
//! node before theirs ([`waiting`]). Nodes no longer renewed are deleted at
//! their ttl by the reaper the etcd backend uses too.

mod acquire;
mod connect;
mod errors;
mod held_checks;
mod inspect;
mod parents;
mod queue;
mod sessions;
mod waiting;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use self::errors::bounded;
use self::held_checks::HeldCheck;
use self::parents::Parents;
use self::queue::{Child, Names, children, zk_no_node};
use self::sessions::{Session, Sessions};
use super::queued::{self, Entry, Held};
use super::{Attempt, LockStore, Pattern, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection};
use crate::kind::LockKind;

/// The ttl of the session used for lookups that belong to no lock.
const LOOKUP_TTL: Duration = Duration::from_secs(30);

/// Leases in ZooKeeper (feature `zookeeper`): made by
/// [`LockerBuilder::zookeeper`](crate::LockerBuilder::zookeeper) or a
/// `zk://` URL.
///
/// Every kind of lock runs on it, granted in the order nodes were created
/// (fair) for every kind, the plain lock included. A lock's ttl is its
/// session's timeout, as the server agrees to it (by default between 2 and
/// 20 ticks of the server): a lock asking for less or more is granted that,
/// and its guard's deadline and renewals follow the granted ttl. A
/// connection lost for less than that keeps the locks; an expired session
/// loses them.
#[derive(Clone)]
pub struct ZooKeeperBackend {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ZooKeeperBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperBackend")
            .field("store", &crate::backend::LockStore::describe(self))
            .finish_non_exhaustive()
    }
}

struct Shared {
    sessions: Sessions,
    timeout: Duration,
    held: Arc<Held<Session>>,
    /// The parent nodes seen to exist.
    parents: Parents,
    /// The reaper task, on the runtime that last needed it.
    reaper: Mutex<Option<tokio::task::AbortHandle>>,
    description: String,
}

impl ZooKeeperBackend {
    fn new(connect_string: String, timeout: Duration) -> Self {
        ZooKeeperBackend {
            shared: Arc::new(Shared {
                sessions: Sessions::new(connect_string.clone(), timeout),
                timeout,
                held: Arc::default(),
                parents: Parents::default(),
                reaper: Mutex::default(),
                description: format!("zookeeper {connect_string}"),
            }),
        }
    }

    /// Starts the reaper on this runtime if it is not running.
    fn reaper(&self) {
        let shared = &self.shared;
        let mut reaper = shared.reaper.lock().unwrap_or_else(PoisonError::into_inner);
        if reaper.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let timeout = shared.timeout;
        let delete: queued::Delete<Session> =
            Box::new(move |entry| Box::pin(async move { delete_entry(&entry, timeout).await }));
        let held = Arc::downgrade(&shared.held);
        let task = tokio::spawn(queued::reap(held, Arc::clone(&shared.held.changed), delete));
        *reaper = Some(task.abort_handle());
    }
}

/// Deletes the node of `entry`: whether it was there. A pending entry
/// (revision 0: its create had no answer yet) names the node's prefix, and
/// the node is found by it.
async fn delete_entry(entry: &Entry<Session>, timeout: Duration) -> Result<bool, StoreError> {
    let client = &entry.lease.client;
    if !entry.lease.may_serve() {
        // Its nodes went with the session.
        return Ok(false);
    }
    if entry.revision != 0 {
        return delete(client, timeout, &entry.stored).await;
    }
    let Some((parent, prefix)) = entry.stored.rsplit_once('/') else {
        return Ok(false);
    };
    let mut any = false;
    for name in children(client, timeout, parent).await? {
        if name.starts_with(prefix) {
            any |= delete(client, timeout, &format!("{parent}/{name}")).await?;
        }
    }
    Ok(any)
}

/// Deletes the node at `path`: whether it was there.
async fn delete(
    client: &zookeeper_client::Client,
    timeout: Duration,
    path: &str,
) -> Result<bool, StoreError> {
    match bounded(timeout, true, client.delete(path, None)).await {
        Ok(()) => Ok(true),
        Err(err) if zk_no_node(&err) => Ok(false),
        Err(err) => Err(err),
    }
}

/// The error of an acquire whose node the reaper is deleting (its ttl ran
/// out before it was asked for again): asked again, it is made anew.
fn reaping() -> StoreError {
    StoreError::not_applied("the node ran out and is being deleted")
}

impl Drop for Shared {
    fn drop(&mut self) {
        let reaper = self
            .reaper
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = reaper.take() {
            task.abort();
        }
    }
}

impl LockStore for ZooKeeperBackend {
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
            let names = Names::of(keys, kind, owner);
            let Some(entry) = self.shared.held.extend(&names.entry) else {
                return Ok(false);
            };
            self.reaper();
            if !entry.lease.may_serve() {
                return Ok(false);
            }
            let timeout = self.shared.timeout;
            let held_check = || HeldCheck {
                client: entry.lease.client.clone(),
                timeout,
            };
            let ask = (entry.stored.clone(), entry.revision);
            match entry.lease.held_checks.ask(ask, timeout, held_check).await {
                // An expired session says so on the next request.
                Err(_) if !entry.lease.may_serve() => Ok(false),
                answer => answer,
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
            if let Some(entry) = shared.held.take(&names.entry) {
                let deleted = delete_entry(&entry, shared.timeout).await;
                if deleted.is_err() && entry.lease.may_serve() {
                    // Left to the reaper, which tries again at once.
                    let expires = Instant::now();
                    shared.held.put(names.entry, Entry { expires, ..entry });
                    self.reaper();
                }
                return deleted;
            }
            // Not recorded (an acquire whose answer never arrived): found by
            // its owner value.
            let session = shared.sessions.for_ttl(LOOKUP_TTL).await?;
            let all = children(&session.client, shared.timeout, &names.parent).await?;
            let mut any = false;
            for child in all.iter().filter_map(|name| Child::parse(name)) {
                if child.owner == owner {
                    any |= delete(&session.client, shared.timeout, &names.path(child.name)).await?;
                }
            }
            Ok(any)
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
            let timeout = shared.timeout;
            let names = Names::of(keys, kind, queued_owner.unwrap_or(""));
            let entry = queued_owner.and_then(|_| shared.held.get(&names.entry));
            match entry {
                Some(entry) => {
                    let mine = entry
                        .stored
                        .rsplit('/')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    waiting::wait_ahead(entry.lease.client.clone(), timeout, names, kind, mine)
                        .await
                }
                None => {
                    let session = shared.sessions.for_ttl(LOOKUP_TTL).await?;
                    waiting::changes_under(session.client.clone(), timeout, names.parent).await
                }
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
