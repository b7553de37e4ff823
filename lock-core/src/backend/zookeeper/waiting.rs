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
use super::queue::{Child, Names, children, in_line};
use crate::backend::ReleaseSignal;
use crate::backend::queued::AbortOnDrop;
use crate::error::StoreError;
use crate::kind::LockKind;

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

/// Tells of every change of the children of `parent` from now on, and of
/// the grant's write on the first of them (for waiters with no node, and
/// observers); active when returned. A node first in line holds only once
/// its grant is written (see acquire.rs), and that write is no change of
/// the children: an observer that read the node before it would otherwise
/// miss the leader. A watch fires once: what the next look sees is compared
/// with the last, so that a change between the two is told too.
pub(super) async fn changes_under(
    client: Client,
    timeout: Duration,
    parent: String,
) -> Result<ReleaseSignal, StoreError> {
    let (mut seen, mut watches) = look_under(&client, timeout, &parent).await?;
    let (told, signal) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        loop {
            watches.changed().await;
            told.send_modify(|n| *n += 1);
            match look_under(&client, timeout, &parent).await {
                Ok((now, next)) => {
                    if now != seen {
                        told.send_modify(|n| *n += 1);
                    }
                    (seen, watches) = (now, next);
                }
                Err(_) => return,
            }
        }
    });
    Ok(ReleaseSignal::new(signal, AbortOnDrop(task.abort_handle())))
}

/// What a look under a parent saw: its children (none if it is gone), by
/// sequence, and whether the first has its grant written.
#[derive(PartialEq)]
struct Under {
    children: Vec<String>,
    first_written: bool,
}

/// The watches a look under a parent left: on its children (or its
/// creation), and on the first child's grant while it is not written.
struct Watches {
    children: OneshotWatcher,
    first: Option<OneshotWatcher>,
}

impl Watches {
    /// Until either watch fires.
    async fn changed(self) {
        match self.first {
            Some(first) => {
                tokio::select! {
                    _ = self.children.changed() => {}
                    _ = first.changed() => {}
                }
            }
            None => {
                self.children.changed().await;
            }
        }
    }
}

/// A look under `parent`, with its watches.
async fn look_under(
    client: &Client,
    timeout: Duration,
    parent: &str,
) -> Result<(Under, Watches), StoreError> {
    let (children, watcher) = match bounded(timeout, false, client.list_and_watch_children(parent))
        .await
    {
        Ok((mut children, watcher)) => {
            in_line(&mut children);
            (children, watcher)
        }
        Err(err) if super::queue::zk_no_node(&err) => {
            let (_, watcher) = bounded(timeout, false, client.check_and_watch_stat(parent)).await?;
            (Vec::new(), watcher)
        }
        Err(err) => return Err(err),
    };
    let mut first = None;
    let mut first_written = false;
    if let Some(name) = children.first() {
        let path = format!("{parent}/{name}");
        let (stat, watcher) = bounded(timeout, false, client.check_and_watch_stat(&path)).await?;
        // Gone already: the children's watch tells of it.
        first_written = stat.is_some_and(|stat| stat.mzxid != stat.czxid);
        if stat.is_some() && !first_written {
            first = Some(watcher);
        }
    }
    let under = Under {
        children,
        first_written,
    };
    let watches = Watches {
        children: watcher,
        first,
    };
    Ok((under, watches))
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
