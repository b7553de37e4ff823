//! Spawning fault clients, freezing them, and collecting their histories.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lock_testkit::history::{Event, Facts, check, now_ms};
use lock_testkit::{RedisServer, send_signal};

pub const SLACK: Duration = Duration::from_millis(750);

/// Scenarios run one at a time: each times pauses and leases against the
/// clock, and two at once on 2 cores starve each other's processes.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for the other scenarios to finish; hold the guard for the whole
/// scenario.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().await
}

/// Freeze windows (`now_ms`) per client.
pub type Pauses = HashMap<String, Vec<(u64, u64)>>;

/// Running fault clients and the lines they print.
pub struct Clients {
    children: Vec<(String, Child)>,
    lines: mpsc::Receiver<String>,
    sender: mpsc::Sender<String>,
    pub events: Vec<Event>,
    pub pauses: Pauses,
}

impl Clients {
    pub fn new() -> Self {
        let (sender, lines) = mpsc::channel();
        Clients {
            children: Vec::new(),
            lines,
            sender,
            events: Vec::new(),
            pauses: HashMap::new(),
        }
    }

    /// Starts `fault_client <args>` as client `id` (the id is `args[3]`).
    pub fn spawn(&mut self, args: &[String], env: &[(&str, &str)]) {
        self.spawn_program(env!("CARGO_BIN_EXE_fault_client"), &args[3], args, env);
    }

    /// Starts `program <args>` as client `id`.
    pub fn spawn_program(
        &mut self,
        program: &str,
        id: &str,
        args: &[String],
        env: &[(&str, &str)],
    ) {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|err| panic!("spawn {program}: {err}"));
        let stdout = child.stdout.take().unwrap();
        let sender = self.sender.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        self.children.push((id.to_owned(), child));
    }

    /// Kills client `id` (SIGKILL) and forgets it: [`finish`](Self::finish)
    /// waits for the others.
    pub fn kill(&mut self, id: &str) {
        let at = self
            .children
            .iter()
            .position(|(c, _)| c == id)
            .expect("client");
        let (_, mut child) = self.children.remove(at);
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Sends `line` to client `id`.
    pub fn say(&mut self, id: &str, line: &str) {
        let stdin = self.stdin(id);
        // A client that has exited cannot hear it: finish() reports that.
        let _ = writeln!(stdin, "{line}").and_then(|()| stdin.flush());
    }

    /// The ids of the running clients.
    pub fn ids(&self) -> Vec<String> {
        self.children.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Every event that arrived so far, without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.lines.try_recv() {
            if let Some(event) = Event::parse(&line) {
                self.events.push(event);
            }
        }
    }

    fn pid(&self, id: &str) -> u32 {
        self.children
            .iter()
            .find(|(c, _)| c == id)
            .expect("client")
            .1
            .id()
    }

    pub fn stdin(&mut self, id: &str) -> &mut ChildStdin {
        let child = &mut self
            .children
            .iter_mut()
            .find(|(c, _)| c == id)
            .expect("client")
            .1;
        child.stdin.as_mut().expect("stdin")
    }

    /// Sends a line to a stepped client.
    pub fn step(&mut self, id: &str) {
        let stdin = self.stdin(id);
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next event (blocking), recorded.
    pub fn next(&mut self) -> Event {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("fault clients went silent");
            if let Some(event) = Event::parse(&line) {
                self.events.push(event.clone());
                return event;
            }
        }
    }

    /// Waits for an event that `matches`.
    pub fn wait_for(&mut self, matches: impl Fn(&Event) -> bool) -> Event {
        loop {
            let event = self.next();
            if matches(&event) {
                return event;
            }
        }
    }

    /// Freezes client `id` (SIGSTOP) for `how_long`, recording the pause.
    pub fn freeze(&mut self, id: &str, how_long: Duration) {
        let pid = self.pid(id);
        let start = now_ms();
        assert!(send_signal(pid, libc::SIGSTOP));
        std::thread::sleep(how_long);
        assert!(send_signal(pid, libc::SIGCONT));
        self.pauses
            .entry(id.to_owned())
            .or_default()
            .push((start, now_ms()));
    }

    /// Freezes `id` without thawing it.
    pub fn stop(&mut self, id: &str) -> u64 {
        assert!(send_signal(self.pid(id), libc::SIGSTOP));
        now_ms()
    }

    /// Thaws `id`, recording the pause that began at `since`.
    pub fn cont(&mut self, id: &str, since: u64) {
        assert!(send_signal(self.pid(id), libc::SIGCONT));
        self.pauses
            .entry(id.to_owned())
            .or_default()
            .push((since, now_ms()));
    }

    /// Collects every remaining event until all clients exit successfully.
    pub fn finish(mut self) -> (Vec<Event>, Pauses) {
        let mut done = self.events.iter().filter(|e| e.kind == "done").count();
        while done < self.children.len() {
            if self.next().kind == "done" {
                done += 1;
            }
        }
        for (id, child) in &mut self.children {
            let status = child.wait().unwrap();
            assert!(status.success(), "client {id} failed: {status}");
        }
        (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.pauses),
        )
    }
}

/// A scenario that panics leaves no client behind, frozen ones included
/// (SIGKILL ends a stopped process too).
impl Drop for Clients {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Shape of a group of workers: how many, on how many keys, how many
/// operations each, lease length and work inside the lock.
pub struct Workers {
    pub count: usize,
    pub keys: u64,
    pub ops: u64,
    pub ttl: Duration,
    pub work: Duration,
}

impl Clients {
    /// Starts `shape.count` workers named `c0`, `c1`, ...
    /// The lock store is the one `lock_url` names (any scheme
    /// `Locker::connect` takes); fenced writes go to `data`.
    pub fn spawn_workers(&mut self, lock_url: &str, data: &RedisServer, shape: Workers) {
        for i in 0..shape.count {
            let id = format!("c{i}");
            self.spawn(
                &worker(
                    lock_url, data, &id, shape.keys, shape.ops, shape.ttl, shape.work,
                ),
                &[],
            );
        }
    }
}

/// Worker arguments: `keys` keys, `ops` operations, lease `ttl`, `work` inside.
pub fn worker(
    lock_url: &str,
    data: &RedisServer,
    id: &str,
    keys: u64,
    ops: u64,
    ttl: Duration,
    work: Duration,
) -> Vec<String> {
    vec![
        "worker".into(),
        lock_url.to_owned(),
        data.url(),
        id.into(),
        keys.to_string(),
        ops.to_string(),
        ttl.as_millis().to_string(),
        work.as_millis().to_string(),
    ]
}

/// The data server's accepted-write lists, per lock key.
pub async fn store_histories(data: &RedisServer, keys: u64) -> HashMap<String, Vec<u64>> {
    history_lists(data, (0..keys).map(|k| format!("fault:{k}"))).await
}

/// The data server's accepted-write lists (`{<name>}:history`) of `names`.
pub async fn history_lists(
    data: &RedisServer,
    names: impl IntoIterator<Item = String>,
) -> HashMap<String, Vec<u64>> {
    let mut conn = data.connection().await;
    let mut lists = HashMap::new();
    for name in names {
        let tokens: Vec<u64> = redis::cmd("LRANGE")
            .arg(format!("{{{name}}}:history"))
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .expect("LRANGE");
        lists.insert(name, tokens);
    }
    lists
}

/// Checks the history, panicking with every violation.
pub fn assert_history(events: &[Event], facts: &Facts) -> lock_testkit::history::Summary {
    match check(events, facts) {
        Ok(summary) => {
            println!("history: {summary:?}");
            summary
        }
        Err(violations) => panic!("history violations:\n{}", violations.join("\n")),
    }
}

pub fn facts(
    ttl: Duration,
    pauses: HashMap<String, Vec<(u64, u64)>>,
    store: HashMap<String, Vec<u64>>,
) -> Facts {
    Facts {
        ttl,
        pauses,
        store,
        slack: SLACK,
        faults: Vec::new(),
    }
}
