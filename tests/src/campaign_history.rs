//! What the fault campaign asks of a history, on top of
//! [`history::check`](crate::history::check).
//!
//! The campaign's clients (`campaign_client`) name each lock `<kind>.<key>`
//! and each task `<process>.t<n>`; renewals name the process and the key.
//! Beyond the suite's checks (no token issued twice, accepted writes in
//! token order and each token's writes together, losses told in time, no
//! write after a told loss), a campaign history must show:
//! - **no lost or phantom update**: each lock's list in the fenced store
//!   holds exactly the writes its clients saw accepted;
//! - **tokens in grant order across kinds**: a lock of a key asked for after
//!   another lock of the key (any kind) was granted gets a larger token;
//! - **superseded holders told**: a holder whose lock went to a newer token
//!   is told (`lost`, or its write refused) within a renewal interval plus
//!   slack, unless it was frozen: no write of it is accepted later without
//!   that;
//! - **liveness**: once the faults stop, every task gets every key
//!   (`final_ok`, never `final_failed`);
//! - **force-release ends holders, and only them**: a holder of a key when
//!   an operator's `force_release` of it was sent (`force_sent`, then
//!   `force_ok`) is told before a write it sends a ttl after (or the write
//!   is refused), and a grant after it (a token above the `force_ok`'s, the
//!   highest it removed) is kept: it is not told `lost`, nor its release
//!   refused as not held (`release_lost`), unless a fault or another
//!   force-release came between;
//! - **inspection shows one holder of a sole lock**: an operator's
//!   `inspect` (`inspect_seen`, one event per holder, its kind as the name)
//!   never shows two holders of one kind that admits one.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::history::{Event, Facts, Summary, check, writes_unexplained};

/// A broken promise, when and on which key it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// When it shows ([`now_ms`](crate::history::now_ms)).
    pub at: u64,
    /// The lock's key (`k0`), whatever the kind.
    pub key: String,
    /// What broke.
    pub text: String,
}

/// The process of a task's or process's client name (`c0.t1` -> `c0`).
fn process(client: &str) -> &str {
    client
        .split_once('.')
        .map_or(client, |(process, _)| process)
}

/// The key of a lock name (`fair.k0` -> `k0`).
fn key_of(name: &str) -> &str {
    name.split_once('.').map_or(name, |(_, key)| key)
}

/// Whether `client`'s process was frozen until less than `window` before
/// `at` (too late to have heard anything since).
fn frozen_until_near(facts: &Facts, client: &str, at: u64, window: u64) -> bool {
    facts
        .pauses
        .get(process(client))
        .into_iter()
        .flatten()
        .any(|&(stop, cont)| stop <= at && cont + window >= at)
}

/// Checks a campaign history; `facts.store` maps each lock name to its
/// accepted writes in the fenced store's order.
pub fn check_campaign(events: &[Event], facts: &Facts) -> Result<Summary, Vec<Violation>> {
    let mut violations = Vec::new();
    let ttl = facts.ttl.as_millis() as u64;
    let slack = facts.slack.as_millis() as u64;

    // The suite's checks, on the events as one client per process, with
    // renewals named like the lock they renew.
    let named: HashMap<(&str, &str, u64), &str> = events
        .iter()
        .filter(|e| e.kind == "acquire_ok")
        .map(|e| {
            (
                (process(&e.client), key_of(&e.key), e.token),
                e.key.as_str(),
            )
        })
        .collect();
    let as_processes: Vec<Event> = events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if e.kind == "renewed"
                && let Some(name) = named.get(&(process(&e.client), e.key.as_str(), e.token))
            {
                e.key = (*name).to_owned();
            }
            e.client = process(&e.client).to_owned();
            e
        })
        .collect();
    let summary = match check(&as_processes, facts) {
        Ok(summary) => summary,
        Err(found) => {
            let at = events.last().map_or(0, |e| e.at);
            violations.extend(found.into_iter().map(|text| Violation {
                at,
                key: text.split(':').next().map(key_of).unwrap_or("").to_owned(),
                text,
            }));
            Summary::default()
        }
    };

    // No lost or phantom update, lock by lock.
    for (name, stored) in &facts.store {
        if let Some(why) = writes_unexplained(events, |key| key == name, stored) {
            violations.push(Violation {
                at: events.last().map_or(0, |e| e.at),
                key: key_of(name).to_owned(),
                text: format!("{name}: {why}"),
            });
        }
    }
    for e in events.iter().filter(|e| e.kind == "write_ok") {
        if !facts.store.contains_key(&e.key) {
            violations.push(Violation {
                at: e.at,
                key: key_of(&e.key).to_owned(),
                text: format!(
                    "{}: an accepted write of a lock the store does not list",
                    e.key
                ),
            });
            break;
        }
    }

    // Each task asks for one lock at a time: its grant's request is its
    // last `acquire_sent` of that lock.
    let mut sent_at: HashMap<(&str, &str), u64> = HashMap::new();
    let mut grants: Vec<(u64, u64, &Event)> = Vec::new();
    for e in events {
        match e.kind.as_str() {
            "acquire_sent" => {
                sent_at.insert((&e.client, &e.key), e.at);
            }
            // The settle phase's grants come right after the last fault.
            "acquire_ok" | "final_ok" => {
                let sent = sent_at.get(&(e.client.as_str(), e.key.as_str())).copied();
                grants.push((sent.unwrap_or(e.at), e.at, e));
            }
            _ => {}
        }
    }

    // Tokens in grant order across kinds, key by key.
    let mut by_key: BTreeMap<&str, Vec<&(u64, u64, &Event)>> = BTreeMap::new();
    for grant in &grants {
        by_key.entry(key_of(&grant.2.key)).or_default().push(grant);
    }
    for (key, grants) in &by_key {
        // Granted before the later request was sent: the later token must
        // be larger. Sorted by grant time, the largest token granted before
        // each request suffices.
        let mut granted: Vec<(u64, u64, &Event)> =
            grants.iter().map(|g| (g.1, g.2.token, g.2)).collect();
        granted.sort_by_key(|g| g.0);
        for &&(sent, _, later) in grants {
            let before = granted
                .iter()
                .take_while(|g| g.0 < sent)
                .max_by_key(|g| g.1);
            if let Some(&(at, token, earlier)) = before
                && later.token <= token
            {
                violations.push(Violation {
                    at: later.at,
                    key: (*key).to_owned(),
                    text: format!(
                        "{} was granted {} {} (asked at {sent}) after {} had been granted {} {} at {at}",
                        later.client, later.key, later.token, earlier.client, earlier.key, token
                    ),
                });
            }
        }
    }

    // Superseded holders told before an accepted write.
    let interval = ttl / 3;
    let told = |client: &str, name: &str, token: u64, by: u64| {
        events.iter().any(|e| {
            e.kind == "lost"
                && e.client == client
                && e.key == name
                && e.token == token
                && e.at <= by
        })
    };
    let mut write_sent: HashMap<(&str, &str, u64), u64> = HashMap::new();
    for e in events {
        match e.kind.as_str() {
            "write_sent" => {
                write_sent.insert((&e.client, &e.key, e.token), e.at);
            }
            "write_ok" => {
                let sent = write_sent
                    .get(&(e.client.as_str(), e.key.as_str(), e.token))
                    .copied()
                    .unwrap_or(e.at);
                // Any newer grant a renewal interval before the write, the
                // holder not frozen until just before it, is one it should
                // have heard of.
                let window = interval + slack;
                let newer = grants.iter().find(|(_, granted, g)| {
                    g.key == e.key && g.token > e.token && granted + window < sent
                });
                if let Some(&(_, granted, newer)) = newer
                    && !told(&e.client, &e.key, e.token, sent)
                    && !frozen_until_near(facts, &e.client, sent, window)
                {
                    violations.push(Violation {
                        at: sent,
                        key: key_of(&e.key).to_owned(),
                        text: format!(
                            "{} wrote {} with {} {} ms after {} was granted {}, and was not told",
                            e.client,
                            e.key,
                            e.token,
                            sent - granted,
                            newer.client,
                            newer.token
                        ),
                    });
                }
            }
            _ => {}
        }
    }

    violations.extend(force_releases(events, facts, &grants));
    violations.extend(inspections(events));

    // Liveness once the faults stopped.
    for e in events.iter().filter(|e| e.kind == "final_failed") {
        violations.push(Violation {
            at: e.at,
            key: key_of(&e.key).to_owned(),
            text: format!(
                "{} did not get {} after the faults stopped",
                e.client, e.key
            ),
        });
    }

    if violations.is_empty() {
        Ok(summary)
    } else {
        violations.sort_by_key(|v| v.at);
        Err(violations)
    }
}

/// An operator's force-release of a key: sent at `sent`, answered at `done`
/// with the tokens it removed reaching `up_to` (every later grant's is
/// above).
struct Forced<'a> {
    key: &'a str,
    sent: u64,
    done: u64,
    up_to: u64,
}

/// The force-releases the operator saw through (`force_sent`, then
/// `force_ok`; a failed one may have removed all or nothing), and when every
/// force-release was sent, failed ones too.
fn forced(events: &[Event]) -> (Vec<Forced<'_>>, Vec<u64>) {
    let mut sent: HashMap<&str, u64> = HashMap::new();
    let (mut done, mut every) = (Vec::new(), Vec::new());
    for e in events {
        match e.kind.as_str() {
            "force_sent" => {
                sent.insert(&e.key, e.at);
                every.push(e.at);
            }
            "force_ok" => done.push(Forced {
                key: &e.key,
                sent: sent.get(e.key.as_str()).copied().unwrap_or(e.at),
                done: e.at,
                up_to: e.token,
            }),
            _ => {}
        }
    }
    (done, every)
}

/// The events of `kinds` of one holder (`client`, lock `name`, `token`) at
/// `from` or later, in order.
fn of_holder<'a>(
    events: &'a [Event],
    kinds: &'a [&str],
    holder: &'a Event,
    from: u64,
) -> impl Iterator<Item = &'a Event> + 'a {
    events.iter().filter(move |e| {
        e.at >= from
            && e.client == holder.client
            && e.key == holder.key
            && e.token == holder.token
            && kinds.contains(&e.kind.as_str())
    })
}

/// What the campaign asks of force-releases (see the module's list).
fn force_releases(
    events: &[Event],
    facts: &Facts,
    grants: &[(u64, u64, &Event)],
) -> Vec<Violation> {
    let mut found = Vec::new();
    let (ttl, slack) = (facts.ttl.as_millis() as u64, facts.slack.as_millis() as u64);
    // A removed holder learns of it at its next renewal, or at its local
    // deadline if no renewal gets through: within a ttl.
    let window = ttl + slack;
    let (all, every) = forced(events);
    let ends = ["release_ok", "release_err", "release_lost", "lost"];
    for force in &all {
        for &(_, granted, holder) in grants {
            if key_of(&holder.key) != force.key {
                continue;
            }
            // Held when it was removed: granted before it was sent, or
            // during it with a token it removed.
            let ended = of_holder(events, &ends, holder, granted).next();
            let removed = granted < force.sent || holder.token <= force.up_to;
            if removed && ended.is_none_or(|e| e.at >= force.sent) {
                let told = of_holder(events, &["lost"], holder, 0).next().map(|e| e.at);
                for sent in of_holder(events, &["write_sent"], holder, force.done + window) {
                    let accepted = of_holder(events, &["write_ok"], holder, sent.at).next();
                    if accepted.is_some()
                        && told.is_none_or(|told| told > sent.at)
                        && !frozen_until_near(facts, &holder.client, sent.at, window)
                    {
                        found.push(Violation {
                            at: sent.at,
                            key: force.key.to_owned(),
                            text: format!(
                                "{} held {} {} when it was force-released at {}, wrote {} ms after and was not told",
                                holder.client,
                                holder.key,
                                holder.token,
                                force.sent,
                                sent.at - force.done
                            ),
                        });
                        break;
                    }
                }
            }
            // Granted after it (a token above what it removed): kept. A
            // loss shows within a renewal, so a later one has another cause.
            if holder.token <= force.up_to || granted < force.sent || granted > force.done + ttl {
                continue;
            }
            let lost = of_holder(events, &["release_lost", "lost"], holder, granted)
                .find(|e| e.at <= granted + window);
            let Some(lost) = lost else { continue };
            let span = force.sent.saturating_sub(ttl)..=lost.at;
            let fault = facts
                .faults
                .iter()
                .any(|&(from, to)| from <= *span.end() && to >= *span.start());
            // Any key's: a pair (`lock_all`) loses both keys with one.
            let again = every.iter().any(|&at| at > force.sent && at <= lost.at);
            if !fault && !again {
                found.push(Violation {
                    at: lost.at,
                    key: force.key.to_owned(),
                    text: format!(
                        "{} was granted {} {} at {granted}, after the force-release at {}, and lost it ({}) at {} with no fault between",
                        holder.client, holder.key, holder.token, force.sent, lost.kind, lost.at
                    ),
                });
            }
        }
    }
    found
}

/// Inspections that show two holders of a kind that admits one, or a
/// writer beside readers.
fn inspections(events: &[Event]) -> Vec<Violation> {
    // `inspect_seen` events of one inspection share the operator and time.
    let mut seen: BTreeMap<(u64, &str), BTreeMap<&str, usize>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == "inspect_seen") {
        let names = seen.entry((e.at, e.client.as_str())).or_default();
        *names.entry(e.key.as_str()).or_default() += 1;
    }
    let mut found = Vec::new();
    for ((at, _), names) in seen {
        for (name, n) in &names {
            let beside_readers = name.starts_with("write.")
                && names.contains_key(format!("read.{}", key_of(name)).as_str());
            if (*n > 1 && !name.starts_with("read.")) || beside_readers {
                found.push(Violation {
                    at,
                    key: key_of(name).to_owned(),
                    text: format!(
                        "an inspection at {at} showed {n} holders of {name}{}",
                        match beside_readers {
                            true => " beside readers",
                            false => "",
                        }
                    ),
                });
            }
        }
    }
    found
}

/// The events of `violation`'s key from 2 ttl before it to one ttl after,
/// renewals left out and at most the 40 nearest to it: the smallest window
/// of the history that shows it.
pub fn window<'a>(events: &'a [Event], violation: &Violation, ttl: Duration) -> Vec<&'a Event> {
    let ttl = ttl.as_millis() as u64;
    let (from, to) = (violation.at.saturating_sub(2 * ttl), violation.at + ttl);
    let mut near: Vec<&Event> = events
        .iter()
        .filter(|e| e.kind != "renewed" && key_of(&e.key) == violation.key)
        .filter(|e| (from..=to).contains(&e.at))
        .collect();
    near.sort_by_key(|e| e.at.abs_diff(violation.at));
    near.truncate(40);
    near.sort_by_key(|e| e.at);
    near
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(at: u64, client: &str, kind: &str, key: &str, token: u64) -> Event {
        Event {
            at,
            client: client.into(),
            kind: kind.into(),
            key: key.into(),
            token,
        }
    }

    fn facts(store: &[(&str, Vec<u64>)]) -> Facts {
        Facts {
            ttl: Duration::from_millis(900),
            store: store
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
            slack: Duration::from_millis(100),
            ..Facts::default()
        }
    }

    fn clean() -> Vec<Event> {
        vec![
            ev(0, "a.t0", "acquire_sent", "plain.k0", 0),
            ev(1, "a.t0", "acquire_ok", "plain.k0", 10),
            ev(2, "b.t0", "acquire_sent", "fair.k0", 0),
            ev(3, "b.t0", "acquire_ok", "fair.k0", 11),
            ev(4, "a.t0", "write_sent", "plain.k0", 10),
            ev(5, "a.t0", "write_ok", "plain.k0", 10),
            ev(6, "a.t0", "release_ok", "plain.k0", 10),
            ev(7, "a.t0", "final_ok", "plain.k0", 12),
        ]
    }

    #[test]
    fn a_clean_campaign_history_passes() {
        let found = check_campaign(&clean(), &facts(&[("plain.k0", vec![10])]));
        assert!(found.is_ok(), "{found:?}");
    }

    #[test]
    fn each_campaign_promise_is_checked() {
        let texts = |events: &[Event], store: &[(&str, Vec<u64>)]| {
            let found = check_campaign(events, &facts(store)).unwrap_err();
            found
                .into_iter()
                .map(|v| v.text)
                .collect::<Vec<_>>()
                .join("\n")
        };
        // A lost update: the store lacks an accepted write.
        let text = texts(&clean(), &[("plain.k0", vec![])]);
        assert!(text.contains("the store lacks one with token 10"), "{text}");
        // A token below one granted before the request.
        let mut events = clean();
        events[3].token = 9;
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(
            text.contains("after a.t0 had been granted plain.k0 10"),
            "{text}"
        );
        // A holder writing long after a newer grant of its lock, untold.
        let mut events = clean();
        events.insert(2, ev(2, "c.t0", "acquire_sent", "plain.k0", 0));
        events.insert(3, ev(2, "c.t0", "acquire_ok", "plain.k0", 13));
        for e in events.iter_mut().filter(|e| e.kind.starts_with("write")) {
            e.at += 1000;
        }
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("and was not told"), "{text}");
        // Told first: no violation of that kind.
        events.insert(4, ev(500, "a.t0", "lost", "plain.k0", 10));
        let found = check_campaign(&events, &facts(&[("plain.k0", vec![10])]));
        let text = format!("{found:?}");
        assert!(!text.contains("was not told"), "{text}");
        // A write left in doubt (its client killed after sending) may be in
        // the store; one nobody sent may not.
        let mut events = clean();
        events.push(ev(9, "c.t0", "write_sent", "plain.k0", 11));
        let found = check_campaign(&events, &facts(&[("plain.k0", vec![10, 11])]));
        assert!(found.is_ok(), "{found:?}");
        let text = texts(&clean(), &[("plain.k0", vec![10, 12])]);
        assert!(
            text.contains("no client saw accepted or left in doubt"),
            "{text}"
        );
        // A holder force-released, writing long after without being told.
        let mut events = clean();
        events.insert(2, ev(2, "op", "force_sent", "k0", 0));
        events.insert(3, ev(3, "op", "force_ok", "k0", 10));
        for e in events.iter_mut().filter(|e| e.kind.starts_with("write")) {
            e.at += 1000;
        }
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("when it was force-released at 2"), "{text}");
        // A grant after a force-release (a token above it), lost with no
        // fault between; a fault between explains it.
        let mut events = clean();
        events.extend([
            ev(10, "op", "force_sent", "k0", 0),
            ev(11, "op", "force_ok", "k0", 11),
            ev(12, "c.t0", "acquire_sent", "plain.k0", 0),
            ev(13, "c.t0", "acquire_ok", "plain.k0", 14),
            ev(20, "c.t0", "lost", "plain.k0", 14),
        ]);
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("with no fault between"), "{text}");
        let mut explained = facts(&[("plain.k0", vec![10])]);
        explained.faults.push((15, 16));
        assert!(check_campaign(&events, &explained).is_ok());
        // Its release refused as not held is such a loss too.
        events.last_mut().unwrap().kind = "release_lost".into();
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("lost it (release_lost)"), "{text}");
        // An inspection that shows two holders of a lock that admits one.
        let mut events = clean();
        events.push(ev(8, "op", "inspect_seen", "plain.k0", 10));
        events.push(ev(8, "op", "inspect_seen", "plain.k0", 12));
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("showed 2 holders of plain.k0"), "{text}");
        // A writer beside a reader.
        let mut events = clean();
        events.push(ev(8, "op", "inspect_seen", "write.k0", 10));
        events.push(ev(8, "op", "inspect_seen", "read.k0", 12));
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(
            text.contains("holders of write.k0 beside readers"),
            "{text}"
        );
        // Two readers are fine.
        let mut events = clean();
        events.push(ev(8, "op", "inspect_seen", "read.k0", 10));
        events.push(ev(8, "op", "inspect_seen", "read.k0", 12));
        assert!(check_campaign(&events, &facts(&[("plain.k0", vec![10])])).is_ok());
        // A task that did not get its key after the faults.
        let mut events = clean();
        events.push(ev(8, "b.t0", "final_failed", "plain.k0", 0));
        let text = texts(&events, &[("plain.k0", vec![10])]);
        assert!(text.contains("did not get plain.k0"), "{text}");
    }
}
