//! Waiting for a turn without polling. A waiter with a node watches the
//! one node it waits behind (the last one before it, of those it waits
//! for) for its delete, then looks again, until none is left: only then is
//! it told, once, and asks for the lock again. A waiter for one of N
//! permits, and one for a striped lock (which has no node while it waits),
//! hear of every change of the parent's children.

use std::time::Duration;

use tokio::sync::watch;
use zookeeper_client::{Client, OneshotWatcher};

use super::errors::bounded;
use super::queue::{Child, Names, children};
use crate::backend::queued::AbortOnDrop;
use crate::backend::{LockKind, ReleaseSignal};
use crate::store_error::StoreError;

/// Tells the waiter whose node is `mine` (a child of `names.parent`) its
/// turn.
pub(super) async fn wait_ahead(
    client: Client,
    timeout: Duration,
    names: Names,
    kind: LockKind,
    mine: String,
) -> Result<ReleaseSignal, StoreError> {
    // The first look and watch are made here, so that a store that fails
    // is told (and waited out by the waiter), not looped on.
    let mut watching = behind(&client, timeout, &names, kind, &mine).await?;
    let (told, signal) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        loop {
            let Some(watcher) = watching.take() else {
                // Told once; the signal then closes, so that a waiter whose
                // entry was made anew subscribes again for it.
                told.send_modify(|n| *n += 1);
                return;
            };
            watcher.changed().await;
            // A broken look drops `told`, which closes the signal: the
            // waiter subscribes again.
            match behind(&client, timeout, &names, kind, &mine).await {
                Ok(next) => watching = next,
                Err(_) => return,
            }
        }
    });
    Ok(ReleaseSignal::new(signal, AbortOnDrop(task.abort_handle())))
}

/// Tells of every change of the children of `parent` from now on (for
/// waiters with no node, and observers); active when returned. A watch
/// fires once: the children read with the next one are compared with the
/// last, so that a change between the two is told too.
pub(super) async fn changes_under(
    client: Client,
    timeout: Duration,
    parent: String,
) -> Result<ReleaseSignal, StoreError> {
    let (mut seen, mut watcher) = watch_children(&client, timeout, &parent).await?;
    let (told, signal) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        loop {
            watcher.changed().await;
            told.send_modify(|n| *n += 1);
            match watch_children(&client, timeout, &parent).await {
                Ok((now, next)) => {
                    if now != seen {
                        told.send_modify(|n| *n += 1);
                    }
                    (seen, watcher) = (now, next);
                }
                Err(_) => return,
            }
        }
    });
    Ok(ReleaseSignal::new(signal, AbortOnDrop(task.abort_handle())))
}

/// The children of `parent` (none if it is gone), sorted, and a watch on
/// them (or on its creation).
async fn watch_children(
    client: &Client,
    timeout: Duration,
    parent: &str,
) -> Result<(Vec<String>, OneshotWatcher), StoreError> {
    match bounded(timeout, false, client.list_and_watch_children(parent)).await {
        Ok((mut children, watcher)) => {
            children.sort_unstable();
            Ok((children, watcher))
        }
        Err(err) if super::queue::zk_no_node(&err) => {
            let (_, watcher) = bounded(timeout, false, client.check_and_watch_stat(parent)).await?;
            Ok((Vec::new(), watcher))
        }
        Err(err) => Err(err),
    }
}

/// A watch on what the waiter with node `mine` waits behind now (`None`:
/// its turn came).
async fn behind(
    client: &Client,
    timeout: Duration,
    names: &Names,
    kind: LockKind,
    mine: &str,
) -> Result<Option<OneshotWatcher>, StoreError> {
    loop {
        if let LockKind::Permit { of } = kind {
            let (all, watcher) = bounded(
                timeout,
                false,
                client.list_and_watch_children(&names.parent),
            )
            .await?;
            let mut all: Vec<Child<'_>> = all.iter().filter_map(|n| Child::parse(n)).collect();
            all.sort_by_key(|child| child.sequence);
            let at = all.iter().position(|child| child.name == mine);
            return Ok(match at {
                Some(at) if at >= of as usize => Some(watcher),
                _ => None,
            });
        }
        let all = children(client, timeout, &names.parent).await?;
        let Some(at) = all.iter().position(|name| name == mine) else {
            // Gone (the session ended): the waiter asks again and learns.
            return Ok(None);
        };
        let before = all[..at].iter().rev().find(|name| {
            let ahead = Child::parse(name).map_or("", |child| child.kind);
            kind != LockKind::Read || ahead == "w"
        });
        let Some(before) = before else {
            return Ok(None);
        };
        let path = names.path(before);
        let (stat, watcher) = bounded(timeout, false, client.check_and_watch_stat(&path)).await?;
        if stat.is_some() {
            return Ok(Some(watcher));
        }
        // Gone between the two looks: look again.
    }
}
