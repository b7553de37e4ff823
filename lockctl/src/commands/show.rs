//! `show KEY`: its holders and waiters.

use lock_core::{Inspection, LockError, Locker, Waiters};

use crate::exit::Exit;
use crate::json::InspectionView;
use crate::output::{WIDTH, emit, emit_json};
use crate::table::{Table, cut};
use crate::text::{duration_text, kind_text, waiters_line};

/// Most waiters `show` lists for people (`--json` has every one the store
/// listed).
const SHOWN_IN_LINE: usize = 20;

/// Prints the holders and waiters of `key`: done (0), or not held (3).
pub async fn run(locker: &Locker, key: &str, json: bool) -> Result<Exit, LockError> {
    let seen = locker.inspect(key).await?;
    if json {
        emit_json(&InspectionView::from(&seen));
    } else {
        emit(&text(&seen));
    }
    Ok(if seen.is_held() {
        Exit::Done
    } else {
        Exit::NotHeld
    })
}

/// What `show` prints for people: a table of holders, the waiters, and the
/// holders' owner values (what fenced writes and force-releases name).
pub fn text(seen: &Inspection) -> String {
    let mut out = String::new();
    if !seen.is_held() {
        out.push_str(&format!("{}: not held\n", cut(&seen.key, WIDTH - 10)));
        out.push_str(&waiters(&seen.waiters));
        return out;
    }
    out.push_str(&format!("{}: held\n", cut(&seen.key, WIDTH - 6)));
    let mut table = Table::new(&["KIND", "TOKEN", "LEFT", "AGE", "PROCESS"], &[4]);
    for holder in &seen.holders {
        table.row(vec![
            kind_text(holder),
            holder.token.to_string(),
            duration_text(holder.remaining),
            duration_text(holder.age),
            holder.process().unwrap_or_else(|| "?".to_owned()),
        ]);
    }
    out.push_str(&table.render(WIDTH));
    out.push_str(&waiters(&seen.waiters));
    out.push_str("owners:\n");
    for holder in &seen.holders {
        out.push_str(&format!("  {}\n", cut(&holder.owner, WIDTH - 2)));
    }
    out
}

/// The waiters: how many, and those listed, in line.
fn waiters(waiters: &Waiters) -> String {
    let mut out = waiters_line(waiters);
    out.push('\n');
    if waiters.queue.is_empty() {
        return out;
    }
    let mut table = Table::new(&["IN LINE", "KIND", "PROCESS"], &[2]);
    for (at, waiter) in waiters.queue.iter().enumerate().take(SHOWN_IN_LINE) {
        table.row(vec![
            (at + 1).to_string(),
            waiter.kind.to_string(),
            waiter.process().unwrap_or_else(|| "?".to_owned()),
        ]);
    }
    out.push_str(&table.render(WIDTH));
    // Where the line was cut (here, or by the store at 100), the rest is
    // counted from all the queued.
    let listed = waiters.queue.len();
    if listed > SHOWN_IN_LINE || listed == lock_core::MAX_LISTED_WAITERS {
        let more = waiters.queued.saturating_sub(listed.min(SHOWN_IN_LINE));
        out.push_str(&format!(
            "and {more} more queued (--json lists the first 100)\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use lock_core::{FencingToken, Holder, LockKind, Unlisted, Waiter, Waiters};

    use super::*;

    #[test]
    fn the_waiters_are_shown_in_line() {
        let mut seen = Inspection::new("ledger");
        let pid = std::process::id();
        let owner = |label: &str| format!("{label}:00000000000000ab:{pid}:1");
        let holder = Holder::new(LockKind::Fair, owner("billing-3"), FencingToken::new(7));
        seen.holders.push(holder);
        seen.waiters = Waiters::new(3, Unlisted::SomeoneWaited);
        for label in ["waiter-1", "waiter-2"] {
            let waiter = Waiter::new(LockKind::Fair, owner(label));
            seen.waiters.queue.push(waiter);
        }
        let shown = text(&seen);
        let expected = format!(
            "waiters: 3 queued; others not listed by this store; someone has waited\n\
             IN LINE  KIND  PROCESS\n\
             1        fair  waiter-1/pid {pid}\n\
             2        fair  waiter-2/pid {pid}\n\
             owners:\n"
        );
        assert!(shown.contains(&expected), "{shown}");
    }

    #[test]
    fn a_long_line_is_shown_in_part_and_counted_whole() {
        let mut seen = Inspection::new("ledger");
        seen.waiters = Waiters::all_listed(150);
        for n in 0..lock_core::MAX_LISTED_WAITERS {
            seen.waiters
                .queue
                .push(Waiter::new(LockKind::Fair, format!("w{n}")));
        }
        let shown = text(&seen);
        assert_eq!(
            shown.lines().filter(|l| l.ends_with("  fair  ?")).count(),
            20
        );
        assert!(shown.contains("and 130 more queued"), "{shown}");
    }
}
