//! Waiting for a turn without polling. A waiter with an entry watches the
//! one entry it waits behind (the last one created before it, of those it
//! waits for) for its delete, then looks again, until none is left: only
//! then is it told, once, and asks for the lock again. A waiter for one of
//! N permits is told when fewer than N entries are before it; a waiter for
//! a striped lock (which has no entry) of every segment freed.

use std::time::Duration;

use etcd_client::{
    Client, EventType, GetOptions, SortOrder, SortTarget, WatchFilterType, WatchOptions,
    WatchStream,
};
use tokio::sync::watch;

use super::errors::{bounded, store_error};
use super::queue::Names;
use crate::backend::ReleaseSignal;
use crate::backend::queued::AbortOnDrop;
use crate::error::{Refusal, StoreError};
use crate::kind::LockKind;

/// What a waiter waits for next.
enum Behind {
    /// Nothing: its turn has come.
    Nothing,
    /// The delete of this key (or, with `prefix`, of any key under it),
    /// watched from the revision after `seen`.
    Delete {
        key: String,
        prefix: bool,
        seen: i64,
    },
}

/// Tells the waiter whose entry has create revision `revision` its turn.
pub(super) async fn wait_ahead(
    client: Client,
    timeout: Duration,
    names: Names,
    kind: LockKind,
    revision: i64,
) -> Result<ReleaseSignal, StoreError> {
    // The first look and watch are made here, so that a store that fails
    // is told (and waited out by the waiter), not looped on.
    let first = behind(&client, timeout, &names, kind, revision).await?;
    let mut watching = watch_for(&client, timeout, first).await?;
    let (told, signal) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        loop {
            let Some(stream) = watching.take() else {
                // Told once; the signal then closes, so that a waiter whose
                // entry was made anew subscribes again for it.
                told.send_modify(|n| *n += 1);
                return;
            };
            // A broken watch drops `told`, which closes the signal: the
            // waiter subscribes again.
            if deleted(stream).await.is_err() {
                return;
            }
            let next = behind(&client, timeout, &names, kind, revision).await;
            match next {
                Ok(next) => match watch_for(&client, timeout, next).await {
                    Ok(next) => watching = next,
                    Err(_) => return,
                },
                Err(_) => return,
            }
        }
    });
    Ok(ReleaseSignal::new(signal, AbortOnDrop(task.abort_handle())))
}

/// The watch for what the waiter waits behind (`None`: its turn came).
async fn watch_for(
    client: &Client,
    timeout: Duration,
    behind: Behind,
) -> Result<Option<WatchStream>, StoreError> {
    match behind {
        Behind::Nothing => Ok(None),
        Behind::Delete { key, prefix, seen } => open(
            client,
            timeout,
            &key,
            prefix,
            Events::Deletes,
            Some(seen + 1),
        )
        .await
        .map(Some),
    }
}

/// Tells of every change under `prefix` from now on, an entry made or
/// removed (for waiters with no entry, and observers, who hear a new
/// leader's entry too); active when returned.
pub(super) async fn changes_under(
    client: Client,
    timeout: Duration,
    prefix: String,
) -> Result<ReleaseSignal, StoreError> {
    let mut stream = open(&client, timeout, &prefix, true, Events::All, None).await?;
    let (told, signal) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        while let Ok(Some(reply)) = stream.message().await {
            if reply.canceled() {
                return;
            }
            if !reply.events().is_empty() {
                told.send_modify(|n| *n += 1);
            }
        }
    });
    Ok(ReleaseSignal::new(signal, AbortOnDrop(task.abort_handle())))
}

/// The events a watch reports.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Events {
    Deletes,
    /// Puts too.
    All,
}

/// What the waiter at `revision` waits for now.
async fn behind(
    client: &Client,
    timeout: Duration,
    names: &Names,
    kind: LockKind,
    revision: i64,
) -> Result<Behind, StoreError> {
    // The entries created before the waiter's, newest first (etcd sorts
    // and limits after the revision filter; a count would ignore it).
    let before = GetOptions::new()
        .with_prefix()
        .with_max_create_revision(revision - 1)
        .with_sort(SortTarget::Create, SortOrder::Descend)
        .with_keys_only();
    // One of N permits waits while N are before it; others while any is.
    let enough = match kind {
        LockKind::Permit { of } => i64::from(of),
        _ => 1,
    };
    let ahead = names.ahead(kind);
    let before = before.with_limit(enough);
    let reply = bounded(
        timeout,
        false,
        client.clone().get(ahead.as_str(), Some(before)),
    )
    .await?;
    let seen = reply.header().map_or(0, |h| h.revision());
    let kvs = reply.kvs();
    Ok(match (kind, kvs.first()) {
        _ if (kvs.len() as i64) < enough => Behind::Nothing,
        // Any of them may go first.
        (LockKind::Permit { .. }, _) => Behind::Delete {
            key: ahead,
            prefix: true,
            seen,
        },
        (_, Some(last)) => Behind::Delete {
            key: String::from_utf8_lossy(last.key()).into_owned(),
            prefix: false,
            seen,
        },
        (_, None) => Behind::Nothing,
    })
}

/// Waits for a delete on `stream`. An error if the watch broke.
async fn deleted(mut stream: WatchStream) -> Result<(), StoreError> {
    loop {
        match stream.message().await {
            // History compacted past the revision asked for: look again.
            Ok(Some(reply)) if reply.canceled() => return Ok(()),
            Ok(Some(reply)) => {
                if reply
                    .events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
                {
                    return Ok(());
                }
            }
            Ok(None) => return Err(StoreError::not_applied("the watch closed")),
            Err(err) => return Err(store_error(err, false)),
        }
    }
}

/// A watch of deletes on `key` (or under it), from revision `from` or now,
/// once etcd confirmed it.
async fn open(
    client: &Client,
    timeout: Duration,
    key: &str,
    prefix: bool,
    events: Events,
    from: Option<i64>,
) -> Result<WatchStream, StoreError> {
    let mut options = WatchOptions::new();
    if events == Events::Deletes {
        options = options.with_filters([WatchFilterType::NoPut]);
    }
    if prefix {
        options = options.with_prefix();
    }
    if let Some(from) = from {
        options = options.with_start_revision(from);
    }
    let opened = async {
        let mut stream = client.clone().watch(key, Some(options)).await?;
        let created = stream.message().await?;
        Ok::<_, etcd_client::Error>((stream, created))
    };
    let (stream, created) = bounded(timeout, false, opened).await?;
    match created {
        Some(reply) if reply.created() && !reply.canceled() => Ok(stream),
        // etcd 3.4 refuses a watch (access rules) with a created and
        // cancelled reply.
        Some(reply) if reply.cancel_reason().contains("permission denied") => Err(
            StoreError::refused(Refusal::PermissionDenied, reply.cancel_reason().to_owned()),
        ),
        Some(reply) if reply.canceled() => Err(StoreError::permanent(format!(
            "etcd refused the watch: {}",
            reply.cancel_reason()
        ))),
        _ => Err(StoreError::not_applied("etcd did not create the watch")),
    }
}
