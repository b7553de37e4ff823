//! The JSON documents of `--json`: what a store answered, one document
//! per call.

use std::time::Duration;

use lock_core::{Holder, Inspection, Leader, LockKind, Unlisted, Waiters};
use serde::Serialize;

/// `show --json`: one key's holders and waiters.
#[derive(Debug, Serialize)]
pub struct InspectionView {
    /// The key asked about.
    pub key: String,
    /// Whether anyone holds it.
    pub held: bool,
    /// Every live holder, of every kind of lock on the key.
    pub holders: Vec<HolderView>,
    /// Who waits, as far as the store can tell.
    pub waiters: WaitersView,
}

/// One holder.
#[derive(Debug, Serialize)]
pub struct HolderView {
    /// `exclusive`, `fair`, `read`, `write`, `semaphore` or `striped`.
    pub kind: String,
    /// The semaphore's permits or the striped lock's segments.
    pub of: Option<u32>,
    /// The striped lock's segment held.
    pub segment: Option<u32>,
    /// The holding Locker's label, for an owner value lock-core made.
    pub label: Option<String>,
    /// `<label>/pid <pid>`, for an owner value lock-core made.
    pub process: Option<String>,
    /// The owner value: one per acquisition.
    pub owner: String,
    /// The fencing token of the acquisition.
    pub token: u64,
    /// Lease left unless renewed, where the store says.
    pub remaining_ms: Option<u64>,
    /// Time since the grant, where the store says.
    pub age_ms: Option<u64>,
}

/// Who waits, as far as the store can tell.
#[derive(Debug, Serialize)]
pub struct WaitersView {
    /// Waiters with an entry in the store.
    pub queued: usize,
    /// Those whose entry names them, each kind's in line.
    pub queue: Vec<WaiterView>,
    /// Those without one: `none` (every waiter has an entry), `unknown`
    /// (the store lists none of them), or `someone_waited` (unlisted, but
    /// one has waited for the current holder).
    pub unlisted: &'static str,
}

/// One waiter in line.
#[derive(Debug, Serialize)]
pub struct WaiterView {
    /// The kind of lock it waits for.
    pub kind: String,
    /// The waiting Locker's label, for an owner value lock-core made.
    pub label: Option<String>,
    /// `<label>/pid <pid>`, for an owner value lock-core made.
    pub process: Option<String>,
    /// Its owner value.
    pub owner: String,
}

/// `leader --json`.
#[derive(Debug, Serialize)]
pub struct LeaderView {
    /// The election's key.
    pub key: String,
    /// Who leads; `None` (null) when no one does.
    pub leader: Option<LeaderOf>,
}

/// The leader of an election.
#[derive(Debug, Serialize)]
pub struct LeaderOf {
    /// The leading Locker's label, for an owner value lock-core made.
    pub label: Option<String>,
    /// `<label>/pid <pid>`, for an owner value lock-core made.
    pub process: Option<String>,
    /// The leadership's owner value: one per term.
    pub owner: String,
    /// The value it published.
    pub value: Option<String>,
    /// Its term's fencing token.
    pub token: u64,
    /// Lease left unless renewed, where the store says.
    pub remaining_ms: Option<u64>,
}

/// `list --json`.
#[derive(Debug, Serialize)]
pub struct ListView {
    /// The pattern asked for.
    pub pattern: String,
    /// The held keys that match it, sorted.
    pub keys: Vec<String>,
}

fn millis(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl From<&Holder> for HolderView {
    fn from(holder: &Holder) -> Self {
        let of = match holder.kind {
            LockKind::Permit { of } | LockKind::Segment { of } => Some(of),
            _ => None,
        };
        HolderView {
            kind: holder.kind.to_string(),
            of,
            segment: holder.segment,
            label: holder.label().map(str::to_owned),
            process: holder.process(),
            owner: holder.owner.clone(),
            token: holder.token.get(),
            remaining_ms: millis(holder.remaining),
            age_ms: millis(holder.age),
        }
    }
}

impl From<&Waiters> for WaitersView {
    fn from(waiters: &Waiters) -> Self {
        let unlisted = match waiters.unlisted {
            Unlisted::None => "none",
            Unlisted::SomeoneWaited => "someone_waited",
            _ => "unknown",
        };
        let queue = waiters.queue.iter().map(|waiter| WaiterView {
            kind: waiter.kind.to_string(),
            label: waiter.label().map(str::to_owned),
            process: waiter.process(),
            owner: waiter.owner.clone(),
        });
        WaitersView {
            queued: waiters.queued,
            queue: queue.collect(),
            unlisted,
        }
    }
}

impl From<&Inspection> for InspectionView {
    fn from(seen: &Inspection) -> Self {
        InspectionView {
            key: seen.key.clone(),
            held: seen.is_held(),
            holders: seen.holders.iter().map(HolderView::from).collect(),
            waiters: (&seen.waiters).into(),
        }
    }
}

impl LeaderView {
    /// The leader of `key`, if any.
    pub fn new(key: &str, leader: Option<Leader>) -> Self {
        LeaderView {
            key: key.to_owned(),
            leader: leader.map(|leader| LeaderOf {
                label: leader.label,
                process: leader.process,
                owner: leader.owner,
                value: leader.value,
                token: leader.token.get(),
                remaining_ms: millis(leader.remaining),
            }),
        }
    }
}
