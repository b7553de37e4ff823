//! Acquiring on ZooKeeper: a queue node for most kinds, a segment's queue
//! taken only when empty for a striped lock.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::Client;

use super::errors::bounded;
use super::queue::{
    Child, Created, Names, children, create, found, holds, parse_segment, segment_tag, zk_no_node,
};
use super::sessions::Session;
use super::{ZooKeeperBackend, delete, reaping};
use crate::backend::queued::{Entry, spread};
use crate::backend::stored_keys::StoredKeys;
use crate::backend::{Attempt, Grant, LockStore};
use crate::error::StoreError;
use crate::kind::LockKind;
use crate::token::FencingToken;

/// The token of a grant just decided: the zxid of a write to the node
/// made after the decision, so that tokens rise in grant order, whatever
/// order the nodes were made in and whatever their kind.
async fn mint(client: &Client, timeout: Duration, path: &str) -> Result<Minted, StoreError> {
    let written = bounded(timeout, true, client.set_data(path, &[], None)).await;
    // The node went (its session ended) between the decision and now.
    let stat = written.map_err(|err| match zk_no_node(&err) {
        true => StoreError::not_applied("the lock's node went before its grant"),
        false => err,
    })?;
    match u64::try_from(stat.mzxid) {
        Ok(zxid) => Ok(Minted {
            token: FencingToken::new(zxid),
            czxid: stat.czxid,
        }),
        Err(_) => Err(StoreError::permanent("ZooKeeper answered a negative zxid")),
    }
}

/// A grant's token, and the czxid of its node (which a create in a multi
/// may not have told).
struct Minted {
    token: FencingToken,
    czxid: i64,
}

impl ZooKeeperBackend {
    /// Records the czxid of the node held under `name` (renewals check the
    /// node by it), where its create did not tell it.
    fn record_czxid(&self, name: &str, czxid: i64) -> Result<(), StoreError> {
        let held = &self.shared.held;
        let Some(entry) = held.get(name).filter(|e| e.revision != czxid) else {
            return Ok(());
        };
        let entry = Entry {
            revision: czxid,
            ..entry
        };
        match held.put(name.to_owned(), entry) {
            true => Ok(()),
            false => Err(reaping().unknown(true)),
        }
    }

    pub(super) async fn enqueue(
        &self,
        keys: &StoredKeys,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let shared = &self.shared;
        let timeout = shared.timeout;
        let names = Names::of(keys, kind, owner);
        self.reaper();
        if shared.held.is_reaping(&names.entry) {
            return Err(reaping());
        }
        if let LockKind::Segment { of } = kind {
            return self.acquire_segment(&names, of, owner, ttl).await;
        }
        let (entry, first) = self.queue_entry(&names, ttl).await?;
        let session = &entry.lease;
        let mine = entry.stored.rsplit('/').next().unwrap_or_default();
        let decided = if first {
            // The first node of a parent made with it: nothing is ahead.
            Ok(Some(true))
        } else {
            let all = children(&session.client, timeout, &names.parent).await;
            // The node stands: whoever gives up on it releases it.
            let all = all.map_err(|err| err.unknown(true))?;
            holds(&all, mine, kind)
        };
        match decided {
            Err(disagrees) => {
                let _ = LockStore::release(self, keys, kind, owner).await;
                Err(disagrees)
            }
            Ok(None) => {
                shared.held.take(&names.entry);
                Err(StoreError::not_applied(
                    "the lock's node is gone with its session",
                ))
            }
            Ok(Some(true)) => {
                let minted = mint(&session.client, timeout, &entry.stored).await?;
                self.record_czxid(&names.entry, minted.czxid)?;
                Ok(Attempt::Acquired(Grant::new(minted.token, session.ttl)))
            }
            // Asked again well within the queue entry's ttl, which keeps it.
            Ok(Some(false)) => Ok(Attempt::Queued {
                remaining: Some(session.ttl / 3),
            }),
        }
    }

    /// The node that stands for this request in the key's queue: the one
    /// it asked for before while its session lives, else a new one; and
    /// whether it was made with its parent (then nothing is ahead of it).
    async fn queue_entry(
        &self,
        names: &Names,
        ttl: Duration,
    ) -> Result<(Entry<Session>, bool), StoreError> {
        let shared = &self.shared;
        let kept = shared
            .held
            .get(&names.entry)
            .filter(|e| e.lease.may_serve());
        match kept {
            Some(entry) if entry.revision != 0 => {
                // Its ttl counts from this request on: the reaper must not
                // take a node about to be granted.
                let entry = shared.held.extend(&names.entry).ok_or_else(reaping)?;
                Ok((entry, false))
            }
            kept => self.put_node(names, kept, ttl).await,
        }
    }

    /// Makes the request's node, or finds the one a create sent before
    /// without an answer made (`unanswered`): never a second node for one
    /// acquisition, as one queued behind its own first would wait for
    /// itself. The entry is recorded before the create is sent: a create
    /// that lands after its acquire gave up is still deleted, at its ttl at
    /// the latest.
    async fn put_node(
        &self,
        names: &Names,
        unanswered: Option<Entry<Session>>,
        ttl: Duration,
    ) -> Result<(Entry<Session>, bool), StoreError> {
        let shared = &self.shared;
        let timeout = shared.timeout;
        let earlier = unanswered.is_some();
        let session = match unanswered {
            Some(entry) => entry.lease,
            None => shared.sessions.for_ttl(ttl).await?,
        };
        let pending = Entry {
            stored: names.path(&names.prefix),
            revision: 0,
            expires: Instant::now() + session.ttl,
            lease: Arc::clone(&session),
        };
        if !shared.held.put(names.entry.clone(), pending) {
            return Err(reaping());
        }
        let client = &session.client;
        let made = match earlier {
            true => found(client, timeout, names, &names.prefix).await?,
            false => None,
        };
        let made = match made {
            Some((path, czxid)) => Created {
                path,
                czxid,
                with_parent: false,
            },
            None => create(client, timeout, names, &names.prefix, &shared.parents).await?,
        };
        let entry = Entry {
            stored: made.path,
            revision: made.czxid,
            expires: Instant::now() + session.ttl,
            lease: session,
        };
        if !shared.held.put(names.entry.clone(), entry.clone()) {
            return Err(reaping().unknown(true));
        }
        Ok((entry, made.with_parent))
    }

    /// Takes a free segment of `of`: one whose queue is empty, by putting
    /// a node in it and keeping it only if it came first.
    async fn acquire_segment(
        &self,
        names: &Names,
        of: u32,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let shared = &self.shared;
        let timeout = shared.timeout;
        let session = match shared
            .held
            .get(&names.entry)
            .filter(|e| e.lease.may_serve())
        {
            Some(entry) => entry.lease,
            None => shared.sessions.for_ttl(ttl).await?,
        };
        let client = &session.client;
        let all = children(client, timeout, &names.parent).await?;
        let mut taken = Vec::new();
        for child in all.iter().filter_map(|name| Child::parse(name)) {
            let Some((index, stored)) = parse_segment(child.kind) else {
                continue;
            };
            if stored != of {
                return Err(StoreError::size_disagrees("segments", of, stored));
            }
            if child.owner == owner {
                // Asked again, or a create whose reply was lost.
                if let Some(attempt) = self
                    .first_of(names, &all, child.name, index, &session)
                    .await?
                {
                    return Ok(attempt);
                }
            }
            taken.push(index);
        }
        for index in spread(owner, of) {
            if taken.contains(&index) {
                continue;
            }
            let prefix = format!("{owner}-{}-", segment_tag(index, of));
            let made = create(client, timeout, names, &prefix, &shared.parents).await?;
            let path = made.path;
            let entry = Entry {
                stored: path.clone(),
                revision: made.czxid,
                expires: Instant::now() + session.ttl,
                lease: Arc::clone(&session),
            };
            if !shared.held.put(names.entry.clone(), entry) {
                return Err(reaping());
            }
            let all = children(client, timeout, &names.parent)
                .await
                .map_err(|e| e.unknown(true))?;
            let mine = path.rsplit('/').next().unwrap_or_default();
            if let Some(attempt) = self.first_of(names, &all, mine, index, &session).await? {
                return Ok(attempt);
            }
        }
        Ok(Attempt::Held { remaining: None })
    }

    /// The grant of segment `index` if node `mine` comes first in it among
    /// `all`; else its node is taken back (`None`).
    async fn first_of(
        &self,
        names: &Names,
        all: &[String],
        mine: &str,
        index: u32,
        session: &Arc<Session>,
    ) -> Result<Option<Attempt>, StoreError> {
        let shared = &self.shared;
        let path = names.path(mine);
        let kind = Child::parse(mine)
            .map(|child| child.kind.to_owned())
            .unwrap_or_default();
        let first = all
            .iter()
            .find(|name| Child::parse(name).is_some_and(|c| c.kind == kind));
        if first.map(String::as_str) == Some(mine) {
            let kept = shared.held.get(&names.entry).filter(|e| e.stored == path);
            if kept.is_some() {
                // Its ttl counts from this request on.
                shared.held.extend(&names.entry).ok_or_else(reaping)?;
            } else {
                let stat = bounded(shared.timeout, false, session.client.check_stat(&path)).await?;
                let Some(stat) = stat else { return Ok(None) };
                let entry = Entry {
                    stored: path.clone(),
                    revision: stat.czxid,
                    expires: Instant::now() + session.ttl,
                    lease: Arc::clone(session),
                };
                if !shared.held.put(names.entry.clone(), entry) {
                    return Err(reaping().unknown(true));
                }
            }
            let minted = mint(&session.client, shared.timeout, &path).await?;
            self.record_czxid(&names.entry, minted.czxid)?;
            let grant = Grant::new(minted.token, session.ttl).with_segment(index);
            return Ok(Some(Attempt::Acquired(grant)));
        }
        // Another got there first: not a place to wait in.
        shared.held.take(&names.entry);
        delete(&session.client, shared.timeout, &path).await?;
        Ok(None)
    }
}
