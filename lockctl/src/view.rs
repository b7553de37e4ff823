//! What a store answered, as lockctl shows it: the JSON documents of
//! `--json`, and the short texts of the tables.

use std::time::Duration;

use lock_core::{Holder, Inspection, Leader, LockKind, Unlisted, Waiters};
use serde::Serialize;

/// `show --json`: one key's holders and waiters.
#[derive(Debug, Serialize)]
pub struct InspectionView {
    pub key: String,
    pub held: bool,
    pub holders: Vec<HolderView>,
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
    pub owner: String,
    pub token: u64,
    pub remaining_ms: Option<u64>,
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
    pub kind: String,
    pub label: Option<String>,
    pub process: Option<String>,
    pub owner: String,
}

/// `leader --json`.
#[derive(Debug, Serialize)]
pub struct LeaderView {
    pub key: String,
    pub leader: Option<LeaderOf>,
}

/// The leader of an election.
#[derive(Debug, Serialize)]
pub struct LeaderOf {
    pub label: Option<String>,
    pub process: Option<String>,
    pub owner: String,
    /// The value it published.
    pub value: Option<String>,
    /// Its term's fencing token.
    pub token: u64,
    pub remaining_ms: Option<u64>,
}

/// `list --json`.
#[derive(Debug, Serialize)]
pub struct ListView {
    pub pattern: String,
    pub keys: Vec<String>,
}

fn millis(d: Option<Duration>) -> Option<u64> {
    d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The label of an owner value lock-core made (`<label>:...`).
fn label_of(owner: &str) -> Option<String> {
    lock_core::Waiter::new(LockKind::Exclusive, owner).process()?;
    owner.split(':').next().map(str::to_owned)
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
            label: label_of(&holder.owner),
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
            label: label_of(&waiter.owner),
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

/// A holder's kind for people: `semaphore of 3`, `striped 2/8`.
pub fn kind_text(holder: &Holder) -> String {
    match (holder.kind, holder.segment) {
        (LockKind::Segment { of }, Some(segment)) => format!("striped {segment}/{of}"),
        (LockKind::Permit { of } | LockKind::Segment { of }, _) => {
            format!("{} of {of}", holder.kind)
        }
        (kind, _) => kind.to_string(),
    }
}

/// A duration in at most 6 characters: `2.9s`, `42s`, `12m03s`, `3h05m`,
/// `-` where the store does not say.
pub fn duration_text(d: Option<Duration>) -> String {
    let Some(d) = d else { return "-".to_owned() };
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1}s", d.as_secs_f64()),
        10..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
    }
}

/// The waiters in a table's cell: `2` where every waiter is listed, `2+?`
/// where others are not listed, `2+w` where one of those has waited.
pub fn waiters_cell(waiters: &Waiters) -> String {
    match waiters.unlisted {
        Unlisted::None => waiters.queued.to_string(),
        Unlisted::SomeoneWaited => format!("{}+w", waiters.queued),
        _ => format!("{}+?", waiters.queued),
    }
}

/// What the cells of `waiters_cell` mean.
pub const WAITERS_LEGEND: &str =
    "WAIT: queued; +? others not listed by this store; +w and someone has waited";

/// The waiters for people, as `show` prints them.
pub fn waiters_line(waiters: &Waiters) -> String {
    match waiters.unlisted {
        Unlisted::None => format!("waiters: {}", waiters.queued),
        Unlisted::SomeoneWaited => format!(
            "waiters: {} queued; others not listed by this store; someone has waited",
            waiters.queued
        ),
        _ => format!(
            "waiters: {} queued; others not listed by this store",
            waiters.queued
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_fit_six_characters() {
        let shown = |s: f64| duration_text(Some(Duration::from_secs_f64(s)));
        assert_eq!(shown(2.94), "2.9s");
        assert_eq!(shown(42.0), "42s");
        assert_eq!(shown(723.0), "12m03s");
        assert_eq!(shown(11_100.0), "3h05m");
        assert_eq!(duration_text(None), "-");
    }

    #[test]
    fn unlisted_waiters_are_never_a_bare_zero() {
        let unknown = Waiters::new(0, Unlisted::Unknown);
        assert_eq!(waiters_cell(&unknown), "0+?");
        assert!(waiters_line(&unknown).contains("not listed by this store"));
        let marked = Waiters::new(0, Unlisted::SomeoneWaited);
        assert!(waiters_line(&marked).ends_with("someone has waited"));
        assert_eq!(waiters_cell(&Waiters::all_listed(0)), "0");
    }
}
