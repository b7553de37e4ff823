//! `watch PATTERN`: a live table of the held keys that match, redrawn
//! every second, with what changed since the frame before.

use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::{Inspection, LockError, Locker};
use tokio::time::MissedTickBehavior;

use super::WIDTH;
use crate::exit::Exit;
use crate::table::Table;
use crate::view::{WAITERS_LEGEND, duration_text, kind_text, waiters_cell};

/// What a frame saw of one key, for the next frame to tell what changed.
#[derive(Debug, Default)]
struct Seen {
    owners: HashSet<String>,
    top_token: u64,
    queued: usize,
}

impl Seen {
    fn of(inspection: &Inspection) -> Self {
        Seen {
            owners: inspection.holders.iter().map(|h| h.owner.clone()).collect(),
            top_token: inspection
                .holders
                .iter()
                .map(|h| h.token.get())
                .max()
                .unwrap_or(0),
            queued: inspection.waiters.queued,
        }
    }
}

/// The frames drawn so far: their number and what the last one saw.
#[derive(Debug, Default)]
pub struct Frames {
    number: u64,
    last: HashMap<String, Seen>,
}

/// What changed on a key since the frame before, for people: `new holder`,
/// `token rose`, `queue +2`.
fn changes(before: Option<&Seen>, now: &Seen) -> String {
    let Some(before) = before else {
        return "new holder".to_owned();
    };
    let mut said = Vec::new();
    if now
        .owners
        .iter()
        .any(|owner| !before.owners.contains(owner))
    {
        said.push("new holder".to_owned());
    } else if now.top_token > before.top_token {
        said.push("token rose".to_owned());
    }
    if now.queued > before.queued {
        said.push(format!("queue +{}", now.queued - before.queued));
    }
    said.join(", ")
}

/// `HH:MM:SS UTC` of `at`.
fn clock(at: SystemTime) -> String {
    let secs = at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) % 86_400;
    format!(
        "{:02}:{:02}:{:02} UTC",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

impl Frames {
    /// The next frame: `seen`, the inspections of the first held keys in
    /// order (`more` keys left out), or the store's error.
    pub fn next(
        &mut self,
        pattern: &str,
        seen: Result<&[Inspection], &LockError>,
        more: usize,
        at: SystemTime,
    ) -> String {
        self.number += 1;
        let mut out = format!("watch {pattern}   frame {}   {}\n", self.number, clock(at));
        let seen = match seen {
            Ok(seen) => seen,
            Err(err) => {
                out.push_str(&format!("the store failed: {err}\n"));
                return out;
            }
        };
        let headers = ["KEY", "KIND", "PROCESS", "TOKEN", "LEFT", "WAIT", "CHANGE"];
        let mut table = Table::new(&headers, &[0, 2]);
        let mut now = HashMap::new();
        for inspection in seen.iter().filter(|i| i.is_held()) {
            let key = &inspection.key;
            let state = Seen::of(inspection);
            let changed = if self.number == 1 {
                String::new()
            } else {
                changes(self.last.get(key), &state)
            };
            for (at, holder) in inspection.holders.iter().enumerate() {
                let first = at == 0;
                let once = |text: String| if first { text } else { String::new() };
                table.row(vec![
                    once(key.clone()),
                    kind_text(holder),
                    holder.process().unwrap_or_else(|| "?".to_owned()),
                    holder.token.to_string(),
                    duration_text(holder.remaining),
                    once(waiters_cell(&inspection.waiters)),
                    once(changed.clone()),
                ]);
            }
            now.insert(key.clone(), state);
        }
        let mut freed: Vec<&String> = self.last.keys().filter(|k| !now.contains_key(*k)).collect();
        freed.sort();
        for key in freed {
            let mut row = vec![key.clone()];
            row.resize(headers.len() - 1, String::new());
            row.push("freed".to_owned());
            table.row(row);
        }
        out.push_str(&table.render(WIDTH));
        if more > 0 {
            out.push_str(&format!("and {more} more keys (--limit)\n"));
        }
        out.push_str(WAITERS_LEGEND);
        out.push('\n');
        self.last = now;
        out
    }
}

/// The first `limit` held keys that match `pattern`, inspected, and how
/// many were left out.
async fn look(
    locker: &Locker,
    pattern: &str,
    limit: usize,
) -> Result<(Vec<Inspection>, usize), LockError> {
    let mut keys = locker.held_keys(pattern).await?;
    keys.sort();
    let more = keys.len().saturating_sub(limit);
    keys.truncate(limit);
    let mut seen = Vec::with_capacity(keys.len());
    for key in &keys {
        seen.push(locker.inspect(key).await?);
    }
    Ok((seen, more))
}

pub async fn run(
    locker: &Locker,
    pattern: &str,
    count: Option<u64>,
    every: Duration,
    limit: usize,
) -> Result<Exit, LockError> {
    // On a terminal each frame replaces the last; in a pipe they follow
    // each other, a blank line apart.
    let redraw = std::io::stdout().is_terminal();
    let mut frames = Frames::default();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = tick.tick() => {}
        }
        let looked = look(locker, pattern, limit).await;
        let (seen, more) = match &looked {
            Ok((seen, more)) => (Ok(seen.as_slice()), *more),
            Err(err) => (Err(err), 0),
        };
        let frame = frames.next(pattern, seen, more, SystemTime::now());
        let mut out = std::io::stdout().lock();
        let lead = match (redraw, frames.number) {
            (true, _) => "\x1b[H\x1b[2J",
            (false, 1) => "",
            (false, _) => "\n",
        };
        // A closed pipe (`| head`) ends the watch.
        if write!(out, "{lead}{frame}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
        if count.is_some_and(|n| frames.number >= n) {
            break;
        }
    }
    Ok(Exit::Done)
}

#[cfg(test)]
mod tests {
    use lock_core::{FencingToken, Holder, LockKind};

    use super::*;

    fn held(key: &str, owner: &str, token: u64, queued: usize) -> Inspection {
        let mut seen = Inspection::new(key);
        let holder = Holder::new(LockKind::Exclusive, owner, FencingToken::new(token));
        seen.holders.push(holder.remaining(Duration::from_secs(3)));
        seen.waiters = lock_core::Waiters::all_listed(queued);
        seen
    }

    #[test]
    fn a_frame_tells_what_changed_since_the_last() {
        let mut frames = Frames::default();
        let at = UNIX_EPOCH + Duration::from_secs(3600 + 120 + 7);
        let first = [held("order:1", "a:1", 5, 0), held("order:2", "b:1", 9, 0)];
        let shown = frames.next("order:*", Ok(&first), 0, at);
        assert!(
            shown.starts_with("watch order:*   frame 1   01:02:07 UTC\n"),
            "{shown}"
        );
        assert!(!shown.contains("new holder"), "{shown}");

        let second = [held("order:1", "c:1", 6, 2), held("order:3", "d:1", 1, 0)];
        let shown = frames.next("order:*", Ok(&second), 4, at);
        assert!(
            line_of(&shown, "order:1").ends_with("new holder, queue +2"),
            "{shown}"
        );
        assert!(line_of(&shown, "order:2").ends_with("freed"), "{shown}");
        assert!(
            line_of(&shown, "order:3").ends_with("new holder"),
            "{shown}"
        );
        assert!(shown.contains("and 4 more keys"), "{shown}");

        let third = [held("order:1", "c:1", 6, 2), held("order:3", "d:1", 2, 0)];
        let shown = frames.next("order:*", Ok(&third), 0, at);
        assert!(line_of(&shown, "order:1").ends_with("3.0s  2"), "{shown}");
        assert!(
            line_of(&shown, "order:3").ends_with("token rose"),
            "{shown}"
        );
        for line in shown.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
    }

    fn line_of(shown: &str, key: &str) -> String {
        shown
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap()
            .to_owned()
    }
}
