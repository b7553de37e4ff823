//! Tombstones that stop a late create. etcd orders no request after one still
//! in flight: a put whose answer never came (its acquire was cancelled, or
//! timed out, or its connection broke, or a member held it back while
//! frozen) can land after the delete that was to undo it, and then stand
//! under a lease that the Locker's other locks keep alive, held by nobody
//! until the process ends.
//!
//! So the first ask of an acquisition puts its entry only while its tombstone,
//! `<namespace>:{<key>}:gone/<entry>`, is no newer than the one this backend
//! last wrote for it; and an entry whose create went unanswered is retired
//! by deleting it and writing its tombstone in one transaction (under the same
//! condition, so that a late retire deletes nothing either). A create still
//! on its way then fails, whenever it lands; a new ask (after an
//! unanswered one, the same owner asks again) knows the tombstone's revision.
//! Tombstones sit outside every kind's prefix, so no queue sees them, and live
//! under the entry's lease (a create under a lease that is gone fails
//! anyway) for [`MARK_LIFE`], after which the reaper deletes them.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse};
use tokio::time::Instant;

use super::errors::{bounded, lease_gone};
use super::held_checks::{delete_entry, delete_when};
use super::leases::Lease;
use super::segments::find_segment;
use crate::backend::queued::{Entry, Held};
use crate::error::StoreError;

/// How long a tombstone stands: a create held back longer than this (in a
/// frozen member, say) could still land.
pub(super) const MARK_LIFE: Duration = Duration::from_secs(300);

/// The entry `name` (`<namespace>:{<key>}:<kind>/<rest>`) split where its
/// key ends: neither a namespace nor an escaped key holds a `}`.
fn split(name: &str) -> (&str, &str) {
    name.split_once("}:").unwrap_or((name, ""))
}

/// The tombstone of the entry `name`.
fn tombstone_of(name: &str) -> String {
    let (head, tail) = split(name);
    format!("{head}}}:gone/{tail}")
}

/// Whether a stored name is a tombstone.
pub(super) fn is_tombstone(stored: &str) -> bool {
    split(stored).1.starts_with("gone/")
}

/// The tombstone of one entry, and the revision this backend last wrote it at
/// (0: none stands): what a put of the entry may find.
pub(super) struct Tombstone {
    pub(super) key: String,
    pub(super) seen: i64,
}

impl Tombstone {
    /// The tombstone of the entry `name`, as this backend knows it.
    pub(super) fn of(held: &Held<Lease>, name: &str) -> Self {
        let key = tombstone_of(name);
        let seen = held.get(&key).map_or(0, |tombstone| tombstone.revision);
        Tombstone { key, seen }
    }

    /// The compare a put of the entry runs under: the tombstone no newer than
    /// `seen`.
    pub(super) fn unmoved(&self) -> Compare {
        Compare::mod_revision(self.key.as_str(), CompareOp::Less, self.seen + 1)
    }
}

/// Retires the entry `name` whose create may still land (`pending`, its
/// put unanswered): deletes it and writes its tombstone in one transaction, then
/// for a striped lock deletes the segment the owner took, found by value
/// (it is named by the segment). Whether an entry was deleted.
///
/// The transaction runs only while the tombstone is no newer than the one this
/// backend knows, so a retire that lands late (unanswered, then retried)
/// cannot delete what a later put of the same owner holds; one that finds a
/// newer tombstone (a retire of ours that landed unanswered) retires past it.
pub(super) async fn retire(
    client: &Client,
    timeout: Duration,
    held: &Held<Lease>,
    name: &str,
    pending: &Entry<Lease>,
) -> Result<bool, StoreError> {
    let mut tombstone = Tombstone::of(held, name);
    // A newer tombstone each time: two rounds unless retires race each other.
    for _ in 0..3 {
        let put_mark = TxnOp::put(
            tombstone.key.as_str(),
            "",
            Some(PutOptions::new().with_lease(pending.lease.id)),
        );
        let txn = Txn::new()
            .when([tombstone.unmoved()])
            .and_then([TxnOp::delete(name, None), put_mark])
            .or_else([TxnOp::get(tombstone.key.as_str(), None)]);
        let reply = match bounded(timeout, true, client.clone().txn(txn)).await {
            Ok(reply) => reply,
            // Nothing under the lease stands, and no create under it can land.
            Err(err) if lease_gone(&err) => return Ok(false),
            Err(err) => return Err(err),
        };
        let responses = reply.op_responses();
        if !reply.succeeded() {
            tombstone.seen = responses
                .iter()
                .find_map(|response| match response {
                    TxnOpResponse::Get(got) => got.kvs().first().map(|kv| kv.mod_revision()),
                    _ => None,
                })
                .unwrap_or(tombstone.seen);
            continue;
        }
        let Some(revision) = reply.header().map(|h| h.revision()) else {
            return Err(StoreError::in_doubt("etcd answered without a header"));
        };
        let recorded = Entry {
            stored: tombstone.key.clone(),
            revision,
            lease: pending.lease.clone(),
            expires: Instant::now() + MARK_LIFE,
        };
        held.record(tombstone.key, recorded);
        let deleted = responses
            .iter()
            .any(|response| matches!(response, TxnOpResponse::Delete(d) if d.deleted() > 0));
        let (head, tail) = split(name);
        let Some(owner) = tail.strip_prefix("segments/owner/") else {
            return Ok(deleted);
        };
        let base = format!("{head}}}:segments/");
        return match find_segment(client, timeout, &base, owner).await? {
            Some((stored, revision)) => delete_entry(client, timeout, &stored, revision).await,
            None => Ok(deleted),
        };
    }
    Err(StoreError::not_applied("retires of one acquisition raced"))
}

/// The error of a put that found its acquisition retired (by a tombstone this
/// backend does not know of): asked again, the acquisition is retired past
/// that tombstone and put anew.
pub(super) fn retired() -> StoreError {
    StoreError::not_applied("the acquisition's entry was retired")
}

/// Deletes the tombstone `stored` if it is still the one written at `revision`.
pub(super) async fn delete_tombstone(
    client: &Client,
    timeout: Duration,
    stored: &str,
    revision: i64,
) -> Result<bool, StoreError> {
    let same = Compare::mod_revision(stored, CompareOp::Equal, revision);
    delete_when(client, timeout, stored, same).await
}
