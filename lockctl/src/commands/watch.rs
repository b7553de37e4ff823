//! `watch PATTERN`: a live table of the held keys that match, redrawn
//! every second, with what changed since the frame before.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::io::{IsTerminal, Write};
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lock_core::{Inspection, LockError, Locker};
use tokio::time::MissedTickBehavior;

use crate::exit::Exit;
use crate::output::{WIDTH, closed, warn};
use crate::table::{Table, cut};
use crate::text::{WAITERS_LEGEND, duration_text, kind_text, waiters_cell};

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
    /// The keys the last frame showed, as it saw them.
    last: HashMap<String, Seen>,
    /// Every key held at the last frame, shown or past `--limit`.
    held: HashSet<String>,
    /// Whether a frame has seen the store yet (there is nothing to compare
    /// with before).
    looked: bool,
}

/// What one look at the store found: the first held keys, inspected, and
/// every key held.
#[derive(Debug, Default)]
pub struct Look {
    /// The inspections of the first `--limit` held keys, in order.
    pub shown: Vec<Inspection>,
    /// Every held key that matched.
    pub held: HashSet<String>,
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
    /// The next frame: what a look found, or the store's error.
    pub fn next(
        &mut self,
        pattern: &str,
        look: Result<&Look, &LockError>,
        at: SystemTime,
    ) -> String {
        self.number += 1;
        let head = format!("   frame {}   {}", self.number, clock(at));
        let room = WIDTH - head.chars().count() - "watch ".len();
        let mut out = format!("watch {}{head}\n", cut(pattern, room));
        let look = match look {
            Ok(look) => look,
            Err(err) => {
                out.push_str(&cut(&format!("the store failed: {err}"), WIDTH));
                out.push('\n');
                return out;
            }
        };
        let seen = &look.shown;
        let headers = ["KEY", "KIND", "PROCESS", "TOKEN", "LEFT", "WAIT", "CHANGE"];
        let mut table = Table::new(&headers, &[0, 2, 6]);
        let mut now = HashMap::new();
        for inspection in seen.iter().filter(|i| i.is_held()) {
            let key = &inspection.key;
            let state = Seen::of(inspection);
            // A key first shown now was either held beyond `--limit` (its
            // changes unknown) or newly held.
            let changed = match (self.looked, self.last.get(key)) {
                (false, _) => String::new(),
                (true, None) if self.held.contains(key) => String::new(),
                (true, before) => changes(before, &state),
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
        let mut freed: Vec<&String> = self
            .last
            .keys()
            .filter(|k| !look.held.contains(*k))
            .collect();
        freed.sort();
        for key in freed {
            let mut row = vec![key.clone()];
            row.resize(headers.len() - 1, String::new());
            row.push("freed".to_owned());
            table.row(row);
        }
        out.push_str(&table.render(WIDTH));
        let more = look.held.len().saturating_sub(seen.len());
        if more > 0 {
            out.push_str(&format!("and {more} more keys held (--limit)\n"));
        }
        out.push_str(WAITERS_LEGEND);
        out.push('\n');
        self.last = now;
        self.held = look.held.clone();
        self.looked = true;
        out
    }
}

/// The held keys that match `pattern`, the first `limit` of them
/// inspected.
async fn look(locker: &Locker, pattern: &str, limit: usize) -> Result<Look, LockError> {
    let mut keys = locker.held_keys(pattern).await?;
    keys.sort();
    let mut shown = Vec::with_capacity(keys.len().min(limit));
    for key in keys.iter().take(limit) {
        shown.push(locker.inspect(key).await?);
    }
    let mut held: HashSet<String> = keys.into_iter().collect();
    // Released between the listing and the inspection: not held.
    for gone in shown.iter().filter(|seen| !seen.is_held()) {
        held.remove(&gone.key);
    }
    Ok(Look { shown, held })
}

/// Resolves at Ctrl-C (SIGINT): listened for from the start, so that one
/// sent before the first frame ends the watch too. (Never, with a warning,
/// where no handler can be set: Ctrl-C then ends the process.)
fn interrupted() -> Pin<Box<dyn Future<Output = ()> + Send>> {
    #[cfg(unix)]
    let listening = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).map(
        |mut interrupts| async move {
            interrupts.recv().await;
        },
    );
    #[cfg(not(unix))]
    let listening = Ok::<_, std::io::Error>(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    match listening {
        Ok(interrupt) => Box::pin(interrupt),
        Err(err) => {
            warn(&format!("Ctrl-C will end lockctl at once: {err}"));
            Box::pin(std::future::pending())
        }
    }
}

/// Draws a frame every `every` until Ctrl-C, `count` frames, or a closed
/// pipe: done (0).
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
    let mut interrupted = interrupted();
    let mut frames = Frames::default();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        let looked = tokio::select! {
            () = &mut interrupted => break,
            looked = async {
                tick.tick().await;
                look(locker, pattern, limit).await
            } => looked,
        };
        let frame = frames.next(pattern, looked.as_ref(), SystemTime::now());
        let lead = match (redraw, frames.number) {
            (true, _) => "\x1b[H\x1b[2J",
            (false, 1) => "",
            (false, _) => "\n",
        };
        let mut out = std::io::stdout().lock();
        // A closed pipe (`| head`) ends the watch; another failure fails it.
        if let Err(err) = write!(out, "{lead}{frame}").and_then(|()| out.flush()) {
            if closed(&err) {
                break;
            }
            warn(&format!("error: the output could not be written: {err}"));
            return Ok(Exit::Error);
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

    /// A look that found `shown`, and `beyond` held past the limit.
    fn look(shown: Vec<Inspection>, beyond: &[&str]) -> Look {
        let mut held: HashSet<String> = shown.iter().map(|i| i.key.clone()).collect();
        held.extend(beyond.iter().map(|k| k.to_string()));
        Look { shown, held }
    }

    fn line_of(shown: &str, key: &str) -> String {
        let line = shown.lines().find(|l| l.starts_with(key));
        line.unwrap_or_else(|| panic!("no {key} in {shown}"))
            .to_owned()
    }

    #[test]
    fn a_frame_tells_what_changed_since_the_last() {
        let mut frames = Frames::default();
        let at = UNIX_EPOCH + Duration::from_secs(3600 + 120 + 7);
        let first = look(
            vec![held("order:1", "a:1", 5, 0), held("order:2", "b:1", 9, 0)],
            &[],
        );
        let shown = frames.next("order:*", Ok(&first), at);
        assert!(
            shown.starts_with("watch order:*   frame 1   01:02:07 UTC\n"),
            "{shown}"
        );
        assert!(!shown.contains("new holder"), "{shown}");

        let second = [held("order:1", "c:1", 6, 2), held("order:3", "d:1", 1, 0)];
        let second = look(second.into(), &["order:4", "order:5", "order:6", "order:7"]);
        let shown = frames.next("order:*", Ok(&second), at);
        assert!(
            line_of(&shown, "order:1").ends_with("new holder, queue +2"),
            "{shown}"
        );
        assert!(line_of(&shown, "order:2").ends_with("freed"), "{shown}");
        assert!(
            line_of(&shown, "order:3").ends_with("new holder"),
            "{shown}"
        );
        assert!(shown.contains("and 4 more keys held"), "{shown}");

        // order:4 was held past the limit: shown now, with no change told;
        // order:3 is held past the limit now, not freed.
        let third = [held("order:1", "c:1", 6, 2), held("order:4", "e:1", 3, 0)];
        let shown = frames.next("order:*", Ok(&look(third.into(), &["order:3"])), at);
        assert!(line_of(&shown, "order:1").ends_with("3.0s  2"), "{shown}");
        assert!(line_of(&shown, "order:4").ends_with("3.0s  0"), "{shown}");
        assert!(!shown.contains("order:3"), "{shown}");

        let fourth = [held("order:1", "c:1", 6, 2), held("order:4", "e:1", 4, 0)];
        let shown = frames.next("order:*", Ok(&look(fourth.into(), &[])), at);
        assert!(
            line_of(&shown, "order:4").ends_with("token rose"),
            "{shown}"
        );
        // order:3 ended past the limit: it had no row to free.
        assert!(!shown.contains("order:3"), "{shown}");
        for line in shown.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
    }

    #[test]
    fn after_a_failed_first_look_nothing_is_new() {
        let mut frames = Frames::default();
        let err = LockError::InvalidUrl {
            source: lock_core::StoreError::not_applied("unreachable"),
        };
        frames.next("order:*", Err(&err), UNIX_EPOCH);
        let seen = look(vec![held("order:1", "a:1", 5, 0)], &[]);
        let shown = frames.next("order:*", Ok(&seen), UNIX_EPOCH);
        assert!(line_of(&shown, "order:1").ends_with("3.0s  0"), "{shown}");
    }

    #[test]
    fn a_long_pattern_and_a_store_error_fit_the_width() {
        let mut frames = Frames::default();
        let pattern = "x".repeat(200);
        let err = LockError::InvalidUrl {
            source: lock_core::StoreError::not_applied("y".repeat(200)),
        };
        let shown = frames.next(&pattern, Err(&err), UNIX_EPOCH);
        for line in shown.lines() {
            assert!(line.chars().count() <= WIDTH, "{line}");
        }
        assert!(shown.contains("frame 1"), "{shown}");
    }
}
