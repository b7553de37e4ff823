//! The short texts of lockctl's output for people: kinds, durations and
//! waiters as a table's cells and `show`'s lines.

use std::time::Duration;

use lock_core::{Holder, LockKind, Unlisted, Waiters};

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
