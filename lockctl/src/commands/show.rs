//! `show KEY`: its holders and waiters.

use lock_core::{Inspection, LockError, Locker};

use super::{WIDTH, print_json};
use crate::exit::Exit;
use crate::table::{Table, cut};
use crate::view::{InspectionView, duration_text, kind_text, waiters_line};

pub async fn run(locker: &Locker, key: &str, json: bool) -> Result<Exit, LockError> {
    let seen = locker.inspect(key).await?;
    if json {
        print_json(&InspectionView::from(&seen));
    } else {
        print!("{}", text(&seen));
    }
    Ok(if seen.is_held() {
        Exit::Done
    } else {
        Exit::NotHeld
    })
}

/// What `show` prints for people: a table of holders, the waiters, and the
/// owner values (what fenced writes and force-releases name).
pub fn text(seen: &Inspection) -> String {
    let mut out = String::new();
    if !seen.is_held() {
        out.push_str(&format!("{}: not held\n", cut(&seen.key, WIDTH - 10)));
        out.push_str(&waiters_line(seen.waiters));
        out.push('\n');
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
    out.push_str(&waiters_line(seen.waiters));
    out.push_str("\nowners:\n");
    for holder in &seen.holders {
        out.push_str(&format!("  {}\n", cut(&holder.owner, WIDTH - 2)));
    }
    out
}
