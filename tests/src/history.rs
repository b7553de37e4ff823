//! Histories of lock clients and the checker that judges them.
//!
//! Client processes print one event a line:
//! `ev <ms> <client> <kind> <key> <token>` (`<ms>` on the host's monotonic
//! clock, see [`now_ms`]), with kinds `acquire_sent`,
//! `acquire_ok`, `acquire_failed`, `acquire_unknown`, `renewed`, `lost`,
//! `write_sent` (optional: a write sent before a loss was told is no
//! write after it), `write_ok`, `write_rejected`, `release_ok`,
//! `release_err` (and the campaign's `release_lost`, a release refused as
//! not held, `final_ok`, `final_failed`). The
//! store keeps, per key, the list of tokens of accepted writes in the order
//! it applied them.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// Milliseconds on the host's monotonic clock (`CLOCK_MONOTONIC`): one
/// clock for every process on the host, which no wall-clock step moves, so
/// the events of several processes compare, also while the campaign steps
/// a store's wall clock.
#[allow(unsafe_code)]
pub fn now_ms() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1000 + now.tv_nsec as u64 / 1_000_000
}

/// Formats one event line.
pub fn event_line(client: &str, kind: &str, key: &str, token: u64) -> String {
    format!("ev {} {client} {kind} {key} {token}", now_ms())
}

/// Prints one event line on stdout, whole (lines of several threads do
/// not mix).
pub fn emit(client: &str, kind: &str, key: &str, token: u64) {
    static OUT: Mutex<()> = Mutex::new(());
    let _guard = OUT.lock();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", event_line(client, kind, key, token));
    let _ = out.flush();
}

/// A tracing layer that turns lock-core's "lease renewed" events into
/// `renewed` lines of client `id`.
pub struct RenewalTap {
    /// The client whose lines these are.
    pub id: Arc<str>,
}

#[derive(Default)]
struct Fields {
    message: String,
    key: String,
    token: u64,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message = text,
            "key" => self.key = text,
            "token" => self.token = text.parse().unwrap_or(0),
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for RenewalTap {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message == "lease renewed" {
            emit(&self.id, "renewed", &fields.key, fields.token);
        }
    }
}

/// One event of one client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When ([`now_ms`]).
    pub at: u64,
    /// Which client process.
    pub client: String,
    /// What happened.
    pub kind: String,
    /// The lock key.
    pub key: String,
    /// The token (0 where none).
    pub token: u64,
}

impl Event {
    /// Parses an `ev ...` line.
    pub fn parse(line: &str) -> Option<Event> {
        let mut parts = line.split(' ');
        if parts.next()? != "ev" {
            return None;
        }
        Some(Event {
            at: parts.next()?.parse().ok()?,
            client: parts.next()?.to_owned(),
            kind: parts.next()?.to_owned(),
            key: parts.next()?.to_owned(),
            token: parts.next()?.parse().ok()?,
        })
    }
}

/// What the checker knows besides the events.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// The clients' lease length.
    pub ttl: Duration,
    /// When each client was frozen (SIGSTOP) and thawed ([`now_ms`]).
    pub pauses: HashMap<String, Vec<(u64, u64)>>,
    /// Accepted writes per key, in the store's order.
    pub store: HashMap<String, Vec<u64>>,
    /// Slack for scheduling on a loaded machine.
    pub slack: Duration,
    /// When each fault of a campaign began and ended ([`now_ms`]): what
    /// can explain a lease lost (an operator's steps are events instead).
    pub faults: Vec<(u64, u64)>,
}

/// A summary of a checked history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Successful acquisitions.
    pub acquired: usize,
    /// Accepted fenced writes.
    pub accepted: usize,
    /// Rejected fenced writes.
    pub rejected: usize,
    /// Losses reported.
    pub lost: usize,
}

/// Checks a history; returns every violation found, or a summary.
pub fn check(events: &[Event], facts: &Facts) -> Result<Summary, Vec<String>> {
    let mut violations = Vec::new();
    let mut summary = Summary::default();
    let ttl = facts.ttl.as_millis() as u64;
    let interval = ttl / 3;
    let slack = facts.slack.as_millis() as u64;

    // 1. No token is issued twice for a key.
    let mut issued: HashSet<(&str, u64)> = HashSet::new();
    for e in events.iter().filter(|e| e.kind == "acquire_ok") {
        summary.acquired += 1;
        if !issued.insert((&e.key, e.token)) {
            violations.push(format!("token {} issued twice for {}", e.token, e.key));
        }
    }

    // 2. The store's accepted writes: non-decreasing, each token contiguous.
    for (key, tokens) in &facts.store {
        let mut closed = HashSet::new();
        for pair in tokens.windows(2) {
            if pair[1] < pair[0] {
                violations.push(format!(
                    "{key}: write with {} accepted after {}",
                    pair[1], pair[0]
                ));
            }
            if pair[0] != pair[1] && !closed.insert(pair[0]) {
                violations.push(format!("{key}: token {} wrote again after others", pair[0]));
            }
        }
    }

    // 3. Losses told in time; 4. no accepted write after the loss.
    for lost in events.iter().filter(|e| e.kind == "lost") {
        summary.lost += 1;
        let same =
            |e: &&Event| e.client == lost.client && e.key == lost.key && e.token == lost.token;
        let confirmed = events
            .iter()
            .filter(same)
            .filter(|e| (e.kind == "renewed" || e.kind == "acquire_ok") && e.at <= lost.at)
            .map(|e| e.at)
            .max();
        let Some(confirmed) = confirmed else {
            violations.push(format!(
                "{} lost token {} it never held",
                lost.client, lost.token
            ));
            continue;
        };
        let mut bound = confirmed + ttl + interval + slack;
        // A frozen holder tells at the first tick after it thaws.
        for &(stop, cont) in facts.pauses.get(&lost.client).into_iter().flatten() {
            if stop <= bound && cont + slack > bound {
                bound = cont + slack;
            }
        }
        if lost.at > bound {
            violations.push(format!(
                "{} told the loss of {} {} ms after its last confirmation (bound {} ms)",
                lost.client,
                lost.token,
                lost.at - confirmed,
                bound - confirmed
            ));
        }
        // A write sent before the loss was told may come back after it.
        let mut sent = None;
        for write in events.iter().filter(same) {
            if write.kind == "write_sent" {
                sent = Some(write.at);
            }
            if write.kind != "write_ok" {
                continue;
            }
            if sent.take().unwrap_or(write.at) > lost.at {
                violations.push(format!(
                    "{} wrote with {} after it was told the lease was lost",
                    lost.client, lost.token
                ));
            }
        }
    }
    summary.accepted = events.iter().filter(|e| e.kind == "write_ok").count();
    summary.rejected = events.iter().filter(|e| e.kind == "write_rejected").count();

    // Writes the clients saw accepted are the store's, which has no others
    // but writes left in doubt.
    let stored: Vec<u64> = facts.store.values().flatten().copied().collect();
    if !facts.store.is_empty()
        && let Some(why) = writes_unexplained(events, |_| true, &stored)
    {
        violations.push(why);
    }
    if violations.is_empty() {
        Ok(summary)
    } else {
        Err(violations)
    }
}

/// Whether `stored` (the tokens of accepted writes in the store) is what the
/// clients' writes of the keys `of` admits: every write they saw accepted,
/// and besides those only writes left in doubt (sent, then failed or never
/// answered, as a killed client's). The reason, if not.
pub fn writes_unexplained(
    events: &[Event],
    of: impl Fn(&str) -> bool,
    stored: &[u64],
) -> Option<String> {
    let mut accepted = Vec::new();
    let mut unanswered: HashMap<(&str, &str, u64), usize> = HashMap::new();
    for e in events.iter().filter(|e| of(&e.key)) {
        let write = (e.client.as_str(), e.key.as_str(), e.token);
        match e.kind.as_str() {
            "write_sent" => *unanswered.entry(write).or_default() += 1,
            "write_ok" | "write_rejected" => {
                if let Some(n) = unanswered.get_mut(&write) {
                    *n = n.saturating_sub(1);
                }
                if e.kind == "write_ok" {
                    accepted.push(e.token);
                }
            }
            _ => {}
        }
    }
    let mut in_doubt: HashMap<u64, usize> = HashMap::new();
    for ((_, _, token), n) in unanswered {
        *in_doubt.entry(token).or_default() += n;
    }
    let mut left: HashMap<u64, usize> = HashMap::new();
    for token in stored {
        *left.entry(*token).or_default() += 1;
    }
    for token in &accepted {
        match left.get_mut(token) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                return Some(format!(
                    "clients saw {} accepted writes, the store lacks one with token {token}",
                    accepted.len()
                ));
            }
        }
    }
    for (token, extra) in left {
        if extra > in_doubt.get(&token).copied().unwrap_or(0) {
            return Some(format!(
                "the store has {extra} write(s) with token {token} that no client saw accepted or left in doubt"
            ));
        }
    }
    None
}

/// The first acquisition at or after `healed` ([`now_ms`]), if any.
pub fn first_acquire_after(events: &[Event], healed: u64) -> Option<u64> {
    events
        .iter()
        .filter(|e| e.kind == "acquire_ok" && e.at >= healed)
        .map(|e| e.at)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at: u64, client: &str, kind: &str, token: u64) -> Event {
        Event {
            at,
            client: client.into(),
            kind: kind.into(),
            key: "k".into(),
            token,
        }
    }

    fn facts(store: Vec<u64>) -> Facts {
        Facts {
            ttl: Duration::from_millis(300),
            store: HashMap::from([("k".to_owned(), store)]),
            ..Facts::default()
        }
    }

    #[test]
    fn a_clean_history_passes() {
        let events = vec![
            ev(0, "a", "acquire_ok", 1),
            ev(1, "a", "write_ok", 1),
            ev(2, "a", "write_ok", 1),
            ev(5, "b", "acquire_ok", 2),
            ev(6, "b", "write_ok", 2),
        ];
        assert!(check(&events, &facts(vec![1, 1, 2])).is_ok());
    }

    #[test]
    fn violations_are_caught() {
        let events = vec![
            ev(0, "a", "acquire_ok", 1),
            ev(0, "b", "acquire_ok", 1),
            ev(1000, "a", "lost", 1),
            ev(1001, "a", "write_ok", 1),
        ];
        let found = check(&events, &facts(vec![2, 1])).unwrap_err();
        let text = found.join("\n");
        assert!(text.contains("issued twice"), "{text}");
        assert!(text.contains("accepted after"), "{text}");
        assert!(text.contains("told the loss"), "{text}");
        assert!(text.contains("after it was told"), "{text}");
    }
}
