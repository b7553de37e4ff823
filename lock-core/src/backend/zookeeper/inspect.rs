//! What ZooKeeper holds, for operators: the nodes under a key's five
//! parents, told apart as the acquire tells them (the first node holds;
//! readers before the first writer; the first N of N permits; the first of
//! each segment's queue), the keys held, and force-release.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::{Client, Error, MultiReadResult, MultiWriteError, Stat};

use super::errors::{bounded, store_error};
use super::queue::{Child, Names, children, holds, parse_segment};
use super::{LOOKUP_TTL, ZooKeeperBackend};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Holder, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::{Waiter, Waiters};

/// The parents of a key's five kinds of lock, with the kind each is read as.
fn parents(keys: &StoredKeys) -> [(String, LockKind); 5] {
    let of = |kind| Names::of(keys, kind, "").parent;
    [
        (of(LockKind::Exclusive), LockKind::Exclusive),
        (of(LockKind::Fair), LockKind::Fair),
        (of(LockKind::Read), LockKind::Read),
        (of(LockKind::Permit { of: 1 }), LockKind::Permit { of: 1 }),
        (of(LockKind::Segment { of: 1 }), LockKind::Segment { of: 1 }),
    ]
}

/// The kind a holding child holds, read from its tag.
fn kind_of(child: &Child<'_>, read_as: LockKind) -> Option<(LockKind, Option<u32>)> {
    Some(match read_as {
        LockKind::Read | LockKind::Write if child.kind == "w" => (LockKind::Write, None),
        LockKind::Read | LockKind::Write => (LockKind::Read, None),
        LockKind::Permit { .. } => {
            let of = child.kind.strip_prefix('p')?.parse().ok()?;
            (LockKind::Permit { of }, None)
        }
        LockKind::Segment { .. } => {
            let (index, of) = parse_segment(child.kind)?;
            (LockKind::Segment { of }, Some(index))
        }
        other => (other, None),
    })
}

/// Whether `name` holds among the sorted `all` under a parent read as
/// `read_as`.
fn holding(all: &[String], name: &str, read_as: LockKind) -> bool {
    let Some(child) = Child::parse(name) else {
        return false;
    };
    match read_as {
        LockKind::Segment { .. } => {
            // The first of its segment's queue.
            let first = all
                .iter()
                .filter_map(|n| Child::parse(n))
                .find(|c| c.kind == child.kind);
            first.is_some_and(|first| first.name == name)
        }
        LockKind::Permit { .. } => {
            let of = child.kind.strip_prefix('p').and_then(|n| n.parse().ok());
            let of = of.unwrap_or(0);
            matches!(holds(all, name, LockKind::Permit { of }), Ok(Some(true)))
        }
        LockKind::Read | LockKind::Write => {
            let as_kind = if child.kind == "w" {
                LockKind::Write
            } else {
                LockKind::Read
            };
            matches!(holds(all, name, as_kind), Ok(Some(true)))
        }
        other => matches!(holds(all, name, other), Ok(Some(true))),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl ZooKeeperBackend {
    async fn lookup_client(&self) -> Result<Client, StoreError> {
        let session = self.shared.sessions.for_ttl(LOOKUP_TTL).await?;
        Ok(session.client.clone())
    }

    pub(super) async fn inspection_of(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let timeout = self.shared.timeout;
        let client = self.lookup_client().await?;
        let mut inspection = Inspection::new(keys.user());
        let mut waiters = Waiters::all_listed(0);
        // A waiter's node, in line (`children` gives them in sequence order).
        let mut wait = |child: Option<Child<'_>>, kind: Option<LockKind>| match (child, kind) {
            (Some(child), Some(kind)) => waiters.line_up(Waiter::new(kind, child.owner)),
            _ => waiters.queued += 1,
        };
        for (parent, read_as) in parents(keys) {
            let all = children(&client, timeout, &parent).await?;
            for name in &all {
                let child = Child::parse(name);
                let kind = child.as_ref().and_then(|c| kind_of(c, read_as));
                if !holding(&all, name, read_as) {
                    wait(child, kind.map(|(kind, _)| kind));
                    continue;
                }
                let (Some(child), path) = (child, format!("{parent}/{name}")) else {
                    continue;
                };
                let Some((kind, segment)) = kind else {
                    continue;
                };
                // The token is the zxid of the grant's write (see acquire.rs):
                // a node first in line but not written yet waits for it.
                let Some(stat) = bounded(timeout, false, client.check_stat(&path)).await? else {
                    continue;
                };
                if stat.mzxid == stat.czxid {
                    wait(Some(child), Some(kind));
                    continue;
                }
                let token = FencingToken::new(u64::try_from(stat.mzxid).unwrap_or(0));
                let age = u64::try_from(now_ms() - stat.mtime).unwrap_or(0);
                let mut holder =
                    Holder::new(kind, child.owner, token).age(Duration::from_millis(age));
                if let Some(segment) = segment {
                    holder = holder.segment(segment);
                }
                inspection.holders.push(holder);
            }
        }
        inspection.waiters = waiters;
        Ok(inspection)
    }

    pub(super) async fn held_keys_matching(
        &self,
        namespace: &str,
        pattern: &Pattern,
    ) -> Result<Vec<String>, StoreError> {
        let timeout = self.shared.timeout;
        let client = self.lookup_client().await?;
        let prefix = format!("{namespace}:{{");
        let mut held = Vec::new();
        for parent in bounded(timeout, false, client.list_children("/")).await? {
            if held.len() >= MAX_LISTED || !parent.starts_with(&prefix) {
                continue;
            }
            let Some(key) = user_key_of(&parent.replace("%2F", "/"), namespace) else {
                continue;
            };
            if !pattern.matches(&key) {
                continue;
            }
            // An emptied parent lingers until the server removes it.
            let stat = bounded(timeout, false, client.check_stat(&format!("/{parent}"))).await?;
            if stat.is_some_and(|stat| stat.num_children > 0) {
                held.push(key);
            }
        }
        Ok(held)
    }

    /// Deletes every node of every kind on the key in one multi, each at
    /// the version it was listed with. Nothing is woken until all of them
    /// are gone, so a waiter granted after that keeps its node (deleted one
    /// by one, the first delete woke the next waiter, which was granted,
    /// and a later delete took its grant away). A node granted or gone in
    /// between fails the multi, which is tried again on a new listing.
    pub(super) async fn force_release_all(
        &self,
        keys: &StoredKeys,
    ) -> Result<ForceReleased, StoreError> {
        let timeout = self.shared.timeout;
        let client = self.lookup_client().await?;
        let mut changed = None;
        for _ in 0..FORCE_RELEASE_TRIES {
            let listed = listed_with_stats(&client, timeout, keys).await?;
            if listed.is_empty() {
                return Ok(ForceReleased::default());
            }
            // A holder's token is its node's last write: none is above the
            // highest listed, and a later grant writes above the multi.
            let up_to = listed.iter().map(|(_, stat)| stat.mzxid).max();
            let up_to = up_to.map(|zxid| FencingToken::new(u64::try_from(zxid).unwrap_or(0)));
            let forced = ForceReleased::new(listed.len(), up_to);
            let mut all = client.new_multi_writer();
            for (path, stat) in &listed {
                all.add_delete(path, Some(stat.version))
                    .map_err(|err| store_error(err, false))?;
            }
            match tokio::time::timeout(timeout, all.commit()).await {
                Ok(Ok(_)) => return Ok(forced),
                Ok(Err(MultiWriteError::OperationFailed { source, .. })) => changed = Some(source),
                // No answer: the multi took all of them or none. Read after a
                // sync (the session may have moved to a server behind it), one
                // still standing as listed says none.
                Ok(Err(MultiWriteError::RequestFailed { .. })) | Err(_) => {
                    bounded(timeout, false, client.sync("/")).await?;
                    if !any_standing(&client, timeout, &listed).await? {
                        return Ok(forced);
                    }
                }
            }
        }
        Err(StoreError::not_applied(KeptChanging(changed)))
    }
}

/// How often a force-release lists and deletes again when a node changed
/// between the two.
const FORCE_RELEASE_TRIES: usize = 5;

/// A force-release whose every try met a node that changed after it was
/// listed; the cause is the last try's.
#[derive(Debug)]
struct KeptChanging(Option<Error>);

impl std::fmt::Display for KeptChanging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the key's nodes changed under every try of the force-release: try it again")
    }
}

impl std::error::Error for KeptChanging {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.as_ref().map(|err| err as _)
    }
}

/// Every node under the key's parents, with its stat (one read of all).
async fn listed_with_stats(
    client: &Client,
    timeout: Duration,
    keys: &StoredKeys,
) -> Result<Vec<(String, Stat)>, StoreError> {
    let mut paths = Vec::new();
    for (parent, _) in parents(keys) {
        let names = children(client, timeout, &parent).await?;
        paths.extend(names.into_iter().map(|name| format!("{parent}/{name}")));
    }
    let stats = read_stats(client, timeout, &paths).await?;
    Ok(paths
        .into_iter()
        .zip(stats)
        .filter_map(|(path, stat)| Some((path, stat?)))
        .collect())
}

/// Whether any of `listed` still stands at the version it was listed with.
async fn any_standing(
    client: &Client,
    timeout: Duration,
    listed: &[(String, Stat)],
) -> Result<bool, StoreError> {
    let paths: Vec<String> = listed.iter().map(|(path, _)| path.clone()).collect();
    let stats = read_stats(client, timeout, &paths).await?;
    Ok(stats
        .iter()
        .zip(listed)
        .any(|(now, (_, then))| now.as_ref().is_some_and(|now| now.version == then.version)))
}

/// The stat of each of `paths` (`None`: no such node), in one multi-read.
async fn read_stats(
    client: &Client,
    timeout: Duration,
    paths: &[String],
) -> Result<Vec<Option<Stat>>, StoreError> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let mut reader = client.new_multi_reader();
    for path in paths {
        reader
            .add_get_data(path)
            .map_err(|err| store_error(err, false))?;
    }
    let results = bounded(timeout, false, reader.commit()).await?;
    results
        .into_iter()
        .map(|result| match result {
            MultiReadResult::Data { stat, .. } => Ok(Some(stat)),
            MultiReadResult::Error { err: Error::NoNode } => Ok(None),
            MultiReadResult::Error { err } => Err(store_error(err, false)),
            _ => Ok(None),
        })
        .collect()
}
