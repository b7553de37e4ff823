//! What ZooKeeper holds, for operators: the nodes under a key's five
//! parents, told apart as the acquire tells them (the first node holds;
//! readers before the first writer; the first N of N permits; the first of
//! each segment's queue), the keys held, and force-release.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zookeeper_client::Client;

use super::errors::bounded;
use super::queue::{Child, Names, children, holds, parse_segment};
use super::{LOOKUP_TTL, ZooKeeperBackend, delete};
use crate::backend::{LockKind, Operators};
use crate::inspect::{Holder, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::keys::StoredKeys;
use crate::store_error::StoreError;
use crate::token::FencingToken;

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
}

impl Operators for ZooKeeperBackend {
    async fn inspect(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let timeout = self.shared.timeout;
        let client = self.lookup_client().await?;
        let mut inspection = Inspection::new(keys.user());
        let mut waiters = 0;
        for (parent, read_as) in parents(keys) {
            let all = children(&client, timeout, &parent).await?;
            for name in &all {
                if !holding(&all, name, read_as) {
                    waiters += 1;
                    continue;
                }
                let (Some(child), path) = (Child::parse(name), format!("{parent}/{name}")) else {
                    continue;
                };
                let Some((kind, segment)) = kind_of(&child, read_as) else {
                    continue;
                };
                // The token is the zxid of the grant's write (see acquire.rs):
                // a node first in line but not written yet waits for it.
                let Some(stat) = bounded(timeout, false, client.check_stat(&path)).await? else {
                    continue;
                };
                if stat.mzxid == stat.czxid {
                    waiters += 1;
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
        inspection.waiters = Some(waiters);
        Ok(inspection)
    }

    async fn held_keys(
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

    async fn force_release(&self, keys: &StoredKeys) -> Result<usize, StoreError> {
        let timeout = self.shared.timeout;
        let client = self.lookup_client().await?;
        let mut removed = 0;
        for (parent, _) in parents(keys) {
            for name in children(&client, timeout, &parent).await? {
                removed +=
                    usize::from(delete(&client, timeout, &format!("{parent}/{name}")).await?);
            }
        }
        Ok(removed)
    }
}
