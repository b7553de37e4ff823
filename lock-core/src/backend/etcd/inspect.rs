//! What etcd holds, for operators: a key's entries of every kind, read in
//! one transaction and told apart as the acquire tells them (the first by
//! create revision hold; readers before the first writer; the first N of N
//! permits; every stored segment), the keys held, and force-release.
//!
//! An entry that has just come first is shown as a holder before its
//! waiter asks again; its token is then the revision of its last write,
//! below the one its grant will write.

use std::collections::HashMap;
use std::time::Duration;

use etcd_client::{
    DeleteOptions, GetOptions, KeyValue, SortOrder, SortTarget, Txn, TxnOp, TxnOpResponse,
};

use super::EtcdBackend;
use super::errors::bounded;
use super::queue::Names;
use crate::backend::queued::admission;
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Holder, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::kind::LockKind;
use crate::token::FencingToken;
use crate::waiters::{Waiter, Waiters};

/// Entries read at most to list the held keys (several per key).
const MAX_LISTED_ENTRIES: i64 = 20 * MAX_LISTED as i64;

/// The prefixes of a key's five kinds of lock, in the order read.
fn bases(keys: &StoredKeys) -> [String; 5] {
    let kinds = [
        LockKind::Exclusive,
        LockKind::Fair,
        LockKind::Read,
        LockKind::Permit { of: 1 },
        LockKind::Segment { of: 1 },
    ];
    kinds.map(|kind| Names::of(keys, kind, "").base)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A holder's entry: its kind, owner and entry.
type Found<'a> = (LockKind, String, &'a KeyValue);

/// The holders among `entries` of a queue (sorted by create revision): the
/// queue of the `at`th kind, at `base`; adds the others to `waiters`.
fn holders_of<'a>(
    at: usize,
    base: &str,
    entries: &'a [KeyValue],
    waiters: &mut Waiters,
) -> Vec<Found<'a>> {
    let name = |kv: &KeyValue| text(&kv.key()[base.len().min(kv.key().len())..]);
    let mut held = Vec::new();
    // The queues' entries as the acquire reads them: its kind, owner.
    let queued = |kv: &KeyValue| -> (LockKind, String) {
        match at {
            0 => (LockKind::Exclusive, name(kv)),
            1 => (LockKind::Fair, name(kv)),
            2 => {
                let entry = name(kv);
                let (tag, owner) = entry.split_once('/').unwrap_or(("", &entry));
                let kind = if tag == "w" {
                    LockKind::Write
                } else {
                    LockKind::Read
                };
                (kind, owner.to_owned())
            }
            _ => {
                let of: u32 = text(kv.value()).parse().unwrap_or(0);
                (LockKind::Permit { of }, name(kv))
            }
        }
    };
    match at {
        0..=3 => {
            let entries: Vec<_> = entries.iter().map(|kv| (queued(kv), kv)).collect();
            for (i, ((kind, owner), kv)) in entries.iter().enumerate() {
                let ahead = entries[..i].iter().map(|((kind, _), _)| *kind);
                if admission::holds(*kind, ahead) {
                    held.push((*kind, owner.clone(), *kv));
                } else {
                    waiters.line_up(Waiter::new(*kind, owner.clone()));
                }
            }
        }
        // Segments: every stored one, valued `<of>|<owner>`.
        _ => {
            for kv in entries {
                let value = text(kv.value());
                if let Some((of, owner)) = value.split_once('|')
                    && let Ok(of) = of.parse()
                {
                    held.push((LockKind::Segment { of }, owner.to_owned(), kv));
                }
            }
        }
    }
    held
}

impl EtcdBackend {
    pub(super) async fn inspection_of(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let shared = &self.shared;
        let bases = bases(keys);
        let sorted = || {
            GetOptions::new()
                .with_prefix()
                .with_sort(SortTarget::Create, SortOrder::Ascend)
        };
        let reads = bases
            .iter()
            .map(|base| TxnOp::get(base.as_str(), Some(sorted())));
        let txn = Txn::new().and_then(reads.collect::<Vec<_>>());
        let reply = bounded(shared.timeout, false, shared.client.clone().txn(txn)).await?;
        let mut inspection = Inspection::new(keys.user());
        let mut waiters = Waiters::all_listed(0);
        let mut found = Vec::new();
        for (at, response) in reply.op_responses().into_iter().enumerate() {
            let TxnOpResponse::Get(got) = response else {
                return Err(StoreError::not_applied("etcd answered a read with a write"));
            };
            let held = holders_of(at, &bases[at.min(4)], got.kvs(), &mut waiters);
            found.extend(held.into_iter().map(|(kind, owner, kv)| {
                let segment = (at == 4)
                    .then(|| text(&kv.key()[bases[4].len()..]).parse().ok())
                    .flatten();
                (kind, owner, kv.mod_revision(), kv.lease(), segment)
            }));
        }
        // One question per lease: a Locker's holders share theirs.
        let mut remaining: HashMap<i64, Option<Duration>> = HashMap::new();
        for &(.., lease, _) in &found {
            if lease != 0 && !remaining.contains_key(&lease) {
                let mut client = shared.client.clone();
                let asked = client.lease_time_to_live(lease, None);
                let ttl = bounded(shared.timeout, false, asked).await?.ttl();
                let left = u64::try_from(ttl).ok().map(Duration::from_secs);
                remaining.insert(lease, left);
            }
        }
        for (kind, owner, token, lease, segment) in found {
            let token = FencingToken::new(u64::try_from(token).unwrap_or(0));
            let mut holder = Holder::new(kind, owner, token);
            if let Some(Some(left)) = remaining.get(&lease) {
                holder = holder.remaining(*left);
            }
            if let Some(segment) = segment {
                holder = holder.segment(segment);
            }
            inspection.holders.push(holder);
        }
        inspection.waiters = waiters;
        Ok(inspection)
    }

    pub(super) async fn held_keys_matching(
        &self,
        namespace: &str,
        pattern: &Pattern,
    ) -> Result<Vec<String>, StoreError> {
        let shared = &self.shared;
        let prefix = format!("{namespace}:{{");
        let options = GetOptions::new()
            .with_prefix()
            .with_keys_only()
            .with_limit(MAX_LISTED_ENTRIES);
        let mut client = shared.client.clone();
        let got = bounded(shared.timeout, false, client.get(prefix, Some(options))).await?;
        let keys = got.kvs().iter().filter_map(|kv| {
            let stored = std::str::from_utf8(kv.key()).ok()?;
            user_key_of(stored, namespace).filter(|key| pattern.matches(key))
        });
        Ok(keys.collect())
    }

    /// Deletes the key's entries of every kind in one transaction; the
    /// highest revision they were written at is at least every removed
    /// holder's token, and below any later grant's.
    pub(super) async fn force_release_all(
        &self,
        keys: &StoredKeys,
    ) -> Result<ForceReleased, StoreError> {
        let shared = &self.shared;
        let every = || Some(DeleteOptions::new().with_prefix().with_prev_key());
        let deletes = bases(keys).map(|base| TxnOp::delete(base, every()));
        let txn = Txn::new().and_then(deletes.to_vec());
        let reply = bounded(shared.timeout, true, shared.client.clone().txn(txn)).await?;
        let (mut removed, mut up_to) = (0, None);
        for response in reply.op_responses() {
            if let TxnOpResponse::Delete(deleted) = response {
                removed += usize::try_from(deleted.deleted()).unwrap_or(0);
                let written = deleted.prev_kvs().iter().map(KeyValue::mod_revision).max();
                up_to = up_to.max(written);
            }
        }
        let up_to = up_to.map(|revision| FencingToken::new(u64::try_from(revision).unwrap_or(0)));
        Ok(ForceReleased::new(removed, up_to))
    }
}
