//! Taking a place: each acquisition puts an entry under the lock's prefix
//! (a repeated request writes the same entry again, a late one puts none
//! back: [`Ask`]), and holds when the entries created before it allow:
//! none for a plain,
//! fair or write lock, no writer for a reader, fewer than N for one of N
//! permits. The others wait their turn, fair by create revision. A
//! striped lock's segments are fixed entries, taken if free.

use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, KeyValue, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse,
};

use super::errors::bounded;
use super::held_checks::delete_entry;
use super::segments::{Segment, held_segments};
use super::tombstones::{self, Tombstone};
use crate::backend::queued::{admission, spread};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::kind::LockKind;

/// Where a kind's entries are, and what an entry is called.
pub(super) struct Names {
    /// The prefix of every entry of the kind on the key.
    pub(super) base: String,
    /// The name the held table files this acquisition under (for a segment,
    /// its entry).
    pub(super) entry: String,
}

impl Names {
    /// The names of `owner`'s acquisition of `kind` on `keys`. Each kind
    /// is a lock of its own, as on Redis; a read-write lock's readers and
    /// writers share one prefix, in sub-prefixes of their own.
    pub(super) fn of(keys: &StoredKeys, kind: LockKind, owner: &str) -> Self {
        let base = keys.of_kind(kind) + "/";
        let entry = match kind {
            LockKind::Read => format!("{base}r/{owner}"),
            LockKind::Write => format!("{base}w/{owner}"),
            // Segments are stored as `<base><segment>`; this names the acquisition.
            LockKind::Segment { .. } => format!("{base}owner/{owner}"),
            _ => format!("{base}{owner}"),
        };
        Names { base, entry }
    }

    /// The entries a waiter of `kind` waits for: all of the kind's, or a
    /// reader only the writers'.
    pub(super) fn ahead(&self, kind: LockKind) -> String {
        match kind {
            LockKind::Read => format!("{}w/", self.base),
            _ => self.base.clone(),
        }
    }
}

/// An entry put or found: its create revision, and whether the entries
/// before it let it hold.
pub(super) struct Place {
    pub(super) revision: i64,
    /// The revision it was last written at: the token if it holds.
    pub(super) token: i64,
    pub(super) lease: i64,
    pub(super) holds: bool,
}

/// Which ask of an acquisition a put is.
pub(super) enum Ask<'a> {
    /// The first: puts the entry (created, or written again if a put of
    /// this ask is repeated), unless the acquisition was retired since the
    /// tombstone this backend knows (see [`tombstones`](super::tombstones)).
    First(&'a Tombstone),
    /// A waiter's next: writes again the entry of `revision`, only if it
    /// still stands (one sent before a release must not put it back).
    Again { revision: i64 },
}

/// Puts `names.entry` under `lease` as `ask` allows, and reads whether it
/// holds, in one transaction; `None` if `ask` found no place to put it.
pub(super) async fn take_place(
    client: &Client,
    timeout: Duration,
    names: &Names,
    kind: LockKind,
    lease: i64,
    ask: Ask<'_>,
) -> Result<Option<Place>, StoreError> {
    let first = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend);
    // The entries that decide: the first of the kind (or, for a reader,
    // the first writer), or the first N for N permits.
    let (value, limit) = match kind {
        LockKind::Permit { of } => (of.to_string(), i64::from(of)),
        _ => (String::new(), 1),
    };
    let deciding = TxnOp::get(names.ahead(kind), Some(first.with_limit(limit)));
    let mine = TxnOp::get(names.entry.as_str(), None);
    let put = TxnOp::put(
        names.entry.as_str(),
        value,
        Some(PutOptions::new().with_lease(lease)),
    );
    let entry = names.entry.as_str();
    // Written again when asked again: a waiter granted later than another
    // then has the later token, whichever queued first.
    let allowed = match ask {
        Ask::First(tombstone) => tombstone.unmoved(),
        Ask::Again { revision } => Compare::create_revision(entry, CompareOp::Equal, revision),
    };
    let txn = Txn::new().when([allowed]).and_then([put, mine, deciding]);
    let reply = bounded(timeout, true, client.clone().txn(txn)).await?;
    if !reply.succeeded() {
        return Ok(None);
    }
    let mut gets = reply.op_responses().into_iter().filter_map(|r| match r {
        TxnOpResponse::Get(got) => Some(got),
        _ => None,
    });
    let (Some(mine), Some(deciding)) = (gets.next(), gets.next()) else {
        return Err(StoreError::in_doubt("etcd answered a transaction in part"));
    };
    let Some(me) = mine.kvs().first() else {
        return Err(StoreError::in_doubt(
            "etcd lost an entry in its own transaction",
        ));
    };
    let deciding = deciding.kvs();
    if let LockKind::Permit { of } = kind
        && let Some(stored) = disagreeing(deciding, of)
    {
        if matches!(ask, Ask::First(_)) {
            // Put by this acquisition, not yet known to wait: not left
            // standing (only this entry, should the delete land late).
            delete_entry(client, timeout, entry, me.create_revision()).await?;
        }
        return Err(StoreError::size_disagrees("permits", of, stored));
    }
    // The deciding entries created before this one (a reader's are
    // writers; the read is limited to as many as can decide).
    let ahead = deciding
        .iter()
        .filter(|kv| kv.create_revision() < me.create_revision())
        .map(|_| {
            if kind == LockKind::Read {
                LockKind::Write
            } else {
                kind
            }
        });
    let holds = admission::holds(kind, ahead);
    Ok(Some(Place {
        revision: me.create_revision(),
        token: me.mod_revision(),
        lease: me.lease(),
        holds,
    }))
}

/// The permit count of a holder that differs from `of`, if any.
fn disagreeing(holders: &[KeyValue], of: u32) -> Option<u32> {
    holders
        .iter()
        .filter_map(|kv| std::str::from_utf8(kv.value()).ok()?.parse::<u32>().ok())
        .find(|&stored| stored != of)
}

/// Finds `owner`'s segment among `of` on `names.base`, or takes a free one
/// unless the acquisition was retired since `tombstone` (see
/// [`tombstones`](super::tombstones)); `None` if all are held. A segment's value is
/// `<of>|<owner>`.
pub(super) async fn take_segment(
    client: &Client,
    timeout: Duration,
    names: &Names,
    of: u32,
    owner: &str,
    lease: i64,
    tombstone: &Tombstone,
) -> Result<Option<Segment>, StoreError> {
    let base = names.base.as_str();
    let value = format!("{of}|{owner}");
    let mut taken = Vec::new();
    for held in held_segments(client, timeout, base).await? {
        if held.of != Some(of) {
            let stored = held.of.unwrap_or(0);
            return Err(StoreError::size_disagrees("segments", of, stored));
        }
        if held.holder == owner.as_bytes() {
            return Ok(Some(held.segment));
        }
        taken.push(held.segment.index);
    }
    for index in spread(owner, of) {
        if taken.contains(&index) {
            continue;
        }
        let stored = format!("{base}{index}");
        let put = TxnOp::put(
            stored.as_str(),
            value.as_str(),
            Some(PutOptions::new().with_lease(lease)),
        );
        let txn = Txn::new()
            .when([
                Compare::create_revision(stored.as_str(), CompareOp::Equal, 0),
                tombstone.unmoved(),
            ])
            .and_then([put])
            .or_else([TxnOp::get(
                tombstone.key.as_str(),
                Some(GetOptions::new().with_keys_only()),
            )]);
        let reply = bounded(timeout, true, client.clone().txn(txn)).await?;
        let tombstoned = reply.op_responses().iter().any(|response| {
            matches!(response, TxnOpResponse::Get(got)
                if got.kvs().first().is_some_and(|kv| kv.mod_revision() > tombstone.seen))
        });
        if tombstoned {
            return Err(tombstones::retired());
        }
        if reply.succeeded() {
            let Some(revision) = reply.header().map(|h| h.revision()) else {
                return Err(StoreError::in_doubt("etcd answered without a header"));
            };
            return Ok(Some(Segment {
                stored,
                index,
                revision,
                lease,
            }));
        }
    }
    Ok(None)
}
