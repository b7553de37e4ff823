//! Elections and scheduled jobs: a published value, handover on resign,
//! observation in order, a body run only while leading; and across OS
//! processes, leaders fenced through failover (SIGKILL, SIGSTOP) and jobs
//! run once per tick by replicas whose timers agree or are skewed.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt;
use lock_core::{FencingToken, LeaderChanges, LockError, MAX_VALUE_LEN};
use lock_testkit::{Process, RedisServer, TestStore, send_signal};
use redis::AsyncCommands;
use tokio::sync::{Notify, mpsc};
use tokio::time::{Instant, timeout};

use super::{SLACK, store_is_empty};

/// The shortest lease every store grants (etcd's are whole seconds).
const TTL: Duration = Duration::from_secs(2);

/// A lease far longer than the test: an observer that hears of a change
/// within [`SLACK`] was told, not woken by the lease's end.
const LONG: Duration = Duration::from_secs(60);

/// The next change an observer tells (`None`: nobody leads), `within` a
/// bound.
async fn told_within(changes: &mut LeaderChanges, within: Duration) -> Option<lock_core::Leader> {
    timeout(within, changes.next())
        .await
        .unwrap_or_else(|_| panic!("no change of leader told within {within:?}"))
        .expect("the stream goes on")
        .expect("observing works")
}

/// The next change told within [`SLACK`] twice: told, not seen at a
/// lease's end.
async fn told(changes: &mut LeaderChanges) -> Option<lock_core::Leader> {
    told_within(changes, SLACK * 2).await
}

/// The next change told within a few of the tests' leases.
async fn next_change(changes: &mut LeaderChanges) -> Option<lock_core::Leader> {
    told_within(changes, TTL * 5).await
}

pub async fn an_election_publishes_hands_over_and_is_observed(store: TestStore) {
    let a = store.locker().await;
    let (b, b_calls) = store.locker_with(|l| l).await;
    let (watcher, _) = store.locker_with(|l| l.ttl(LONG)).await;
    let mut changes = watcher.observe("relay");
    assert_eq!(told(&mut changes).await, None, "nobody leads yet");
    // Every store's separators, and more than an owner value holds inline.
    let value = format!("http://10.0.0.7:8080/relay?a=1|b {}", "é".repeat(40));
    let first = a.election("relay").value(&value).ttl(LONG).await.unwrap();
    assert_eq!(first.value(), Some(value.as_str()));
    let leader = b.leader("relay").await.unwrap().expect("a leads");
    assert_eq!(leader.value.as_deref(), Some(value.as_str()));
    assert_eq!(leader.token, first.token());
    let pid = format!("/pid {}", std::process::id());
    assert!(leader.process.is_some_and(|p| p.ends_with(&pid)));
    assert!(leader.remaining.is_none_or(|left| left <= LONG));
    let seen = told(&mut changes).await.expect("a leads");
    assert_eq!((seen.token, seen.value), (first.token(), Some(value)));

    // A waiting candidate leads at once when the leader resigns.
    let asked = b_calls.acquires();
    let candidate = tokio::spawn(async move { b.election("relay").value("b").ttl(LONG).await });
    b_calls.acquires_reach(asked + 1).await;
    let before = first.token();
    first.resign().await.unwrap();
    let resigned = Instant::now();
    let second = timeout(SLACK, candidate)
        .await
        .expect("the candidate did not lead at once after the resignation")
        .unwrap()
        .unwrap();
    let after = resigned.elapsed();
    assert!(
        after <= SLACK,
        "handed over {after:?} after the resignation"
    );
    assert!(second.token() > before);
    // Told once or twice: read between the two terms, or (etcd) before
    // b's grant was written; at last with its value and token.
    loop {
        let seen = told(&mut changes).await;
        if let Some(seen) = seen.filter(|seen| seen.token == second.token()) {
            assert_eq!(seen.value.as_deref(), Some("b"));
            break;
        }
    }
    // Nothing changes while b leads; a wake-up the observer still had (b's
    // campaign announce heard after the read it woke) is used up here, so
    // what tells it of b's resignation below is that resignation's announce.
    let quiet = timeout(SLACK, changes.next()).await;
    assert!(quiet.is_err(), "a change told while b leads: {quiet:?}");

    // A value too long to publish is refused before the store is asked.
    let err = a
        .election("other")
        .value("v".repeat(MAX_VALUE_LEN + 1))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidConfig { .. }), "{err:?}");
    assert!(err.to_string().contains("value"), "{err}");

    // Dropped, it resigns in the background, and observers are told.
    drop(second);
    assert_eq!(told(&mut changes).await, None);
    drop(changes);
    store_is_empty(&store).await;
}

/// What a body of `run_as_leader` tells the test.
#[derive(Debug, PartialEq)]
enum Term {
    Started(&'static str, FencingToken),
    Dropped(&'static str, FencingToken),
}

/// Sends `Dropped` when the body is dropped (cancelled or done).
struct OnDrop(&'static str, FencingToken, mpsc::UnboundedSender<Term>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        let _ = self.2.send(Term::Dropped(self.0, self.1));
    }
}

pub async fn run_as_leader_stops_the_body_on_loss_and_resigns_on_failure(store: TestStore) {
    let (told, mut terms) = mpsc::unbounded_channel();
    let fail_now = Arc::new(Notify::new());
    let a = store.locker().await;
    let leading_a = {
        let (a, told, fail_now) = (a.clone(), told.clone(), fail_now.clone());
        let mut term = 0;
        tokio::spawn(a.election("relay").ttl(TTL).run_as_leader(move |lease| {
            let (told, fail_now) = (told.clone(), fail_now.clone());
            term += 1;
            let nth = term;
            async move {
                let token = lease.token();
                assert_eq!(
                    FencingToken::current(),
                    Some(token),
                    "the body runs in the term's scope"
                );
                let _dropped = OnDrop("a", token, told.clone());
                told.send(Term::Started("a", token)).unwrap();
                if nth == 2 {
                    fail_now.notified().await;
                    return Err("the relay failed");
                }
                std::future::pending::<Result<(), &str>>().await
            }
        }))
    };
    let mut next_term = async || {
        let next = timeout(TTL * 5, terms.recv()).await;
        let next = next.expect("no term began or ended in time");
        next.expect("the bodies go on")
    };
    let Term::Started("a", first) = next_term().await else {
        panic!("a did not lead first");
    };
    // The lease taken away: the body is stopped, and a campaigns again.
    store.steal(&a, "relay").await;
    let stopped = timeout(TTL + SLACK, next_term()).await;
    let stopped = stopped.expect("the body ran on past the loss");
    assert_eq!(stopped, Term::Dropped("a", first));
    let Term::Started("a", second) = next_term().await else {
        panic!("a did not campaign again after its loss");
    };
    assert!(second > first);

    // A body that fails resigns, and steps back: the waiting candidate leads.
    let (b, b_calls) = store.locker_with(|l| l).await;
    let asked = b_calls.acquires();
    let leading_b = {
        let told = told.clone();
        // b steps back longer than a, so that a leads after b's panic.
        tokio::spawn(
            b.election("relay")
                .ttl(TTL * 3)
                .run_as_leader(move |lease| {
                    told.send(Term::Started("b", lease.token())).unwrap();
                    async { panic!("the relay's body panics") as Result<(), &'static str> }
                }),
        )
    };
    b_calls.acquires_reach(asked + 1).await;
    fail_now.notify_one();
    assert_eq!(next_term().await, Term::Dropped("a", second));
    let Term::Started("b", third) = next_term().await else {
        panic!("the waiting candidate did not lead after a's body failed");
    };
    assert!(third > second);
    // A body that panics resigns too: a leads again.
    let Term::Started("a", fourth) = next_term().await else {
        panic!("a did not lead after b's body panicked");
    };
    assert!(fourth > third);

    let mut changes = store.locker().await.observe("relay");
    leading_a.abort();
    leading_b.abort();
    assert!(leading_a.await.unwrap_err().is_cancelled());
    assert!(leading_b.await.unwrap_err().is_cancelled());
    // Dropped with its task, the leadership resigns in the background.
    while next_change(&mut changes).await.is_some() {}
    store_is_empty(&store).await;
}

/// Candidate processes (the `candidate` binary) and what they print, as
/// `(name, when, line)` in the order read.
struct Candidates {
    children: Vec<(&'static str, Child, ChildStdin)>,
    lines: mpsc::UnboundedReceiver<(&'static str, Instant, String)>,
    told: mpsc::UnboundedSender<(&'static str, Instant, String)>,
    /// Every line read, for the checks at the end.
    seen: Vec<(&'static str, Instant, String)>,
    /// Lines read but not yet taken by [`expect`](Self::expect).
    pending: VecDeque<(&'static str, Instant, String)>,
}

impl Candidates {
    fn new() -> Self {
        let (told, lines) = mpsc::unbounded_channel();
        Candidates {
            children: Vec::new(),
            lines,
            told,
            seen: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    /// Starts candidate `name` and waits until it campaigns.
    async fn start(&mut self, name: &'static str, args: &[String]) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_candidate"))
            .args(&args[..2])
            .arg(name)
            .args(&args[2..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn candidate");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let stdin = child.stdin.take().expect("piped");
        let told = self.told.clone();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let _ = told.send((name, Instant::now(), line));
            }
        });
        self.children.push((name, child, stdin));
        self.expect(|n, line| n == name && line == "campaigning")
            .await;
    }

    /// The first line not yet taken for which `wanted` holds, with when it
    /// was read.
    async fn expect(
        &mut self,
        wanted: impl Fn(&str, &str) -> bool,
    ) -> (&'static str, Instant, String) {
        if let Some(i) = self.pending.iter().position(|(n, _, line)| wanted(n, line)) {
            return self.pending.remove(i).expect("found");
        }
        loop {
            let next = timeout(TTL * 5, self.lines.recv()).await;
            let Ok(Some((name, at, line))) = next else {
                panic!(
                    "no candidate said what the test waits for; they said {:?}",
                    self.said()
                );
            };
            self.seen.push((name, at, line.clone()));
            if wanted(name, &line) {
                return (name, at, line);
            }
            self.pending.push_back((name, at, line));
        }
    }

    fn pid(&self, name: &str) -> u32 {
        self.children
            .iter()
            .find(|c| c.0 == name)
            .expect("a candidate")
            .1
            .id()
    }

    fn tell(&mut self, name: &str, line: &str) {
        let stdin = &mut self
            .children
            .iter_mut()
            .find(|c| c.0 == name)
            .expect("a candidate")
            .2;
        writeln!(stdin, "{line}").expect("the candidate reads");
    }

    /// Everything said so far, as `<name>: <line>`.
    fn said(&self) -> Vec<String> {
        (self.seen.iter())
            .map(|(name, _, line)| format!("{name}: {line}"))
            .collect()
    }

    /// The tokens of the `leading` lines, in the order read.
    fn terms(&self) -> Vec<(&'static str, u64)> {
        (self.seen.iter())
            .filter(|(_, _, line)| line.starts_with("leading "))
            .map(|(name, _, line)| (*name, token_in(line)))
            .collect()
    }
}

impl Drop for Candidates {
    fn drop(&mut self) {
        for (_, child, _) in &mut self.children {
            let _ = send_signal(child.id(), libc::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The token in a `leading <token>` line.
fn token_in(line: &str) -> u64 {
    let token = line.rsplit(' ').next().unwrap_or_default();
    token.parse().expect("a token")
}

/// Waits until the leader with `token` has written through the fence (there
/// is no event to wait on in another process: the list is read again).
async fn wrote(data: &mut redis::aio::MultiplexedConnection, token: u64) {
    let written = async {
        while !data
            .lrange::<_, Vec<u64>>("relay:history", -1, -1)
            .await
            .unwrap()
            .contains(&token)
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    timeout(TTL * 5, written)
        .await
        .expect("the leader never wrote");
}

/// Three candidate processes: the leader resigns (handed over at once),
/// the next is frozen past its lease (replaced; on resume it is told, and
/// its writes are refused by the fence), the third is killed (replaced
/// within its ttl and a second). Every term is in token order, the fenced
/// history has no write of an overlapping term, and an observer saw every
/// leader in order.
pub async fn leaders_fail_over_across_processes_behind_a_fence(store: TestStore) {
    let Some((url, ca)) = store.process_url() else {
        return; // A store in this process: no other process reaches it.
    };
    let fence = RedisServer::start();
    let mut args = vec![
        url,
        "relay".into(),
        TTL.as_millis().to_string(),
        fence.url(),
    ];
    args.extend(ca.map(|ca| ca.display().to_string()));
    let mut changes = store.locker().await.observe("relay");
    assert_eq!(next_change(&mut changes).await, None);
    let (saw, mut seen) = mpsc::unbounded_channel();
    let watching = tokio::spawn(async move {
        while let Some(Ok(change)) = changes.next().await {
            let _ = saw.send(change.map(|leader| (leader.token.get(), leader.value)));
        }
    });
    let mut data = fence.connection().await;
    let mut candidates = Candidates::new();
    candidates.start("a", &args).await;
    let (_, _, line) = candidates
        .expect(|n, line| n == "a" && line.starts_with("leading"))
        .await;
    candidates.start("b", &args).await;
    candidates.start("c", &args).await;
    wrote(&mut data, token_in(&line)).await;

    // Resigned: a waiting candidate leads at once.
    candidates.tell("a", "resign");
    let (_, resigned, _) = candidates
        .expect(|n, line| n == "a" && line.starts_with("resigned"))
        .await;
    let (second, led, line) = candidates
        .expect(|_, line| line.starts_with("leading"))
        .await;
    let after = led.duration_since(resigned);
    assert!(
        after <= SLACK,
        "handed over {after:?} after the resignation"
    );
    wrote(&mut data, token_in(&line)).await;

    // Frozen past its lease: replaced, told on resume, its writes refused.
    send_signal(candidates.pid(second), libc::SIGSTOP);
    let (third, _, line) = candidates
        .expect(|n, line| n != second && line.starts_with("leading"))
        .await;
    // Resumed once the new leader has written.
    wrote(&mut data, token_in(&line)).await;
    send_signal(candidates.pid(second), libc::SIGCONT);
    candidates
        .expect(|n, line| n == second && line.starts_with("refused"))
        .await;
    candidates
        .expect(|n, line| n == second && line.starts_with("lost"))
        .await;

    // Killed: replaced within its ttl and a second.
    let (_, child, _) = candidates
        .children
        .iter_mut()
        .find(|c| c.0 == third)
        .unwrap();
    child.kill().unwrap();
    let killed = Instant::now();
    let (fourth, led, line) = candidates
        .expect(|_, line| line.starts_with("leading"))
        .await;
    assert_eq!(fourth, second, "only the resumed candidate is left");
    let after = led.duration_since(killed);
    assert!(
        after <= TTL + Duration::from_secs(1),
        "replaced {after:?} after the kill"
    );
    wrote(&mut data, token_in(&line)).await;
    // Resigned once the observer has read it: a term shorter than a read
    // of the store may be missed (as `observe` says), and this one would
    // be only as long as a write on a loaded machine.
    let last = token_in(&line);
    let mut observed = Vec::new();
    let read = async {
        while let Some(change) = seen.recv().await {
            let last_seen = change.as_ref().is_some_and(|(token, _)| *token == last);
            observed.push(change);
            if last_seen {
                return;
            }
        }
    };
    timeout(TTL * 3, read)
        .await
        .expect("the observer did not read the last leader");
    candidates.tell(fourth, "resign");
    candidates
        .expect(|n, line| n == fourth && line.starts_with("resigned"))
        .await;

    // Terms in token order, and no write of an overlapping term accepted.
    let terms = candidates.terms();
    assert_eq!(terms.len(), 4, "{terms:?}");
    assert!(
        terms.windows(2).all(|w| w[0].1 < w[1].1),
        "terms out of token order: {terms:?}"
    );
    let history: Vec<u64> = data.lrange("relay:history", 0, -1).await.unwrap();
    let mut blocks: Vec<u64> = history.clone();
    blocks.dedup();
    let written: Vec<u64> = terms
        .iter()
        .map(|t| t.1)
        .filter(|t| blocks.contains(t))
        .collect();
    assert_eq!(
        blocks, written,
        "accepted writes of overlapping terms: {history:?}"
    );
    let said = candidates.said();
    assert_eq!(
        blocks.len(),
        4,
        "a term wrote nothing: {blocks:?}; {said:?}"
    );
    // The observer saw every leader, in order, with its value, and the end.
    let mut observed: Vec<(u64, Option<String>)> = observed.into_iter().flatten().collect();
    let last = terms.last().map(|t| t.1);
    while let Ok(Some(change)) = timeout(TTL * 3, seen.recv()).await {
        match change {
            Some(leader) => observed.push(leader),
            None if observed.last().map(|l| l.0) == last => break,
            None => {}
        }
    }
    watching.abort();
    // On etcd a leader read before its grant is told again with its token:
    // the last of a run of one leader's is its term's.
    let mut terms_seen: Vec<(u64, Option<String>)> = Vec::new();
    for (token, value) in observed {
        match terms_seen.last_mut() {
            Some(last) if last.1 == value && last.0 < token => last.0 = token,
            _ => terms_seen.push((token, value)),
        }
    }
    let expected: Vec<(u64, Option<String>)> = terms
        .iter()
        .map(|(name, token)| (*token, Some(name.to_string())))
        .collect();
    assert_eq!(
        terms_seen, expected,
        "the observer missed or reordered a leader"
    );
    store_is_empty(&store).await;
}

/// `ticker` processes with timers `offsets` apart, `ticks` of `period`,
/// each job held at least `hold`: every tick's job ran exactly once, in
/// token order, and nothing is left.
async fn jobs_run_once_per_tick(
    store: &TestStore,
    offsets: [u64; 3],
    ticks: u64,
    period: u64,
    hold: u64,
) {
    let Some((url, ca)) = store.process_url() else {
        return; // A store in this process: no other process reaches it.
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // Started once every process is up (a few of them start at once).
    let start = now + 3000;
    let replicas: Vec<Process> = offsets
        .iter()
        .map(|offset| {
            let mut args = vec![url.clone(), "job:report".into()];
            args.extend([start, period, *offset, ticks, hold].map(|n| n.to_string()));
            args.extend(ca.as_ref().map(|ca| ca.display().to_string()));
            Process::spawn(env!("CARGO_BIN_EXE_ticker"), &args)
        })
        .collect();
    let outputs: Vec<String> =
        tokio::task::spawn_blocking(move || replicas.into_iter().map(Process::finish).collect())
            .await
            .unwrap();
    let mut runs: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut skips = 0;
    for line in outputs.iter().flat_map(|out| out.lines()) {
        match line.split(' ').collect::<Vec<_>>().as_slice() {
            ["ran", tick, token] => runs
                .entry(tick.parse().unwrap())
                .or_default()
                .push(token.parse().unwrap()),
            ["skipped", _] => skips += 1,
            _ => panic!("a ticker said {line:?}"),
        }
    }
    let twice: Vec<_> = runs.iter().filter(|(_, r)| r.len() != 1).collect();
    assert!(twice.is_empty(), "ticks run more than once: {twice:?}");
    assert_eq!(runs.len() as u64, ticks, "ticks no replica ran: {runs:?}");
    assert_eq!(skips, 2 * ticks, "every other replica skips each tick");
    let tokens: Vec<u64> = runs.values().map(|r| r[0]).collect();
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens out of tick order: {tokens:?}"
    );
    store_is_empty(store).await;
}

/// The tick logic (a skip when held, the hold past the skew, tokens in tick
/// order) is the same on every store: it is proven at length once, on Redis
/// (`redis_only::a_scheduled_job_runs_once_per_tick_at_length`), and each
/// store runs a few ticks of it, enough for what only the store can break.
pub(crate) const TICKS_PER_STORE: u64 = 5;

/// 3 replicas whose timers agree, a few ticks: each job runs once.
pub async fn a_scheduled_job_runs_once_per_tick_across_processes(store: TestStore) {
    jobs_run_once_per_tick(&store, [0, 0, 0], TICKS_PER_STORE, 800, 400).await;
}

/// 3 replicas whose timers are up to 2 s apart, a few ticks: held at least
/// past the skew, each job still runs once per tick.
pub async fn a_scheduled_job_runs_once_per_tick_with_timers_2s_apart(store: TestStore) {
    jobs_run_once_per_tick(&store, [0, 1000, 2000], 3, 3200, 2600).await;
}

/// The long forms, on one store: 50 ticks of agreeing timers, and 6 of
/// timers 2 s apart.
pub async fn scheduled_jobs_at_length(store: TestStore) {
    jobs_run_once_per_tick(&store, [0, 0, 0], 50, 800, 400).await;
    jobs_run_once_per_tick(&store, [0, 1000, 2000], 6, 3200, 2600).await;
}
