//! History tests: holders in separate processes, some paused (SIGSTOP)
//! inside their critical section past their lease, every write fenced.
//! Afterwards the store's history must be ordered and every rejected write
//! must come from a holder that had lost its lease.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use lock_testkit::{PostgresServer, RedisServer, send_signal};

const WRITERS: usize = 3;
const RUN_MILLIS: u64 = 3000;
const PAUSES: usize = 3;
/// Three times the writers' 300 ms lease: another writer has 600 ms after
/// the lease lapses to take the lock and write, so every write of the
/// frozen one is stale.
const PAUSE: Duration = Duration::from_millis(900);

struct Writers {
    children: Vec<Child>,
    /// Tells a writer that said `holding` to go on with its writes.
    go: Vec<ChildStdin>,
    lines: mpsc::Receiver<(usize, String)>,
}

fn start_writers(redis_url: &str, kind: &str, pg_url: &str) -> Writers {
    let (tx, lines) = mpsc::channel();
    let mut children = Vec::new();
    let mut go = Vec::new();
    for id in 0..WRITERS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fenced_writer"))
            .args([redis_url, kind, pg_url, &RUN_MILLIS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn fenced_writer");
        go.push(child.stdin.take().unwrap());
        let stdout = child.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send((id, line));
            }
        });
        children.push(child);
    }
    Writers {
        children,
        go,
        lines,
    }
}

/// Pauses a writer that just said it holds the lock, `PAUSES` times, then
/// collects every line until all writers are done. A paused writer is
/// stopped before it is told to write, so its writes come after the pause;
/// the others go on meanwhile (and take the lock once its lease lapses).
fn drive(mut writers: Writers) -> Run {
    let mut seen = Vec::new();
    let mut paused = Vec::new();
    let mut resumes = Vec::new();
    let mut done = 0;
    while done < WRITERS {
        let (id, line) = writers
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("writers went silent");
        if line == "done" {
            done += 1;
        }
        let holding = line.starts_with("holding");
        seen.push((id, line));
        if !holding {
            continue;
        }
        // One pause at a time, so each one has others writing past it.
        let pausing = resumes
            .last()
            .is_some_and(|r: &std::thread::JoinHandle<()>| !r.is_finished());
        if resumes.len() < PAUSES && !pausing {
            // Paused inside its critical section, before its writes.
            paused.push(seen.len() - 1);
            let pid = writers.children[id].id();
            assert!(send_signal(pid, libc::SIGSTOP));
            resumes.push(std::thread::spawn(move || {
                std::thread::sleep(PAUSE);
                assert!(send_signal(pid, libc::SIGCONT));
            }));
        }
        // Read once the writer runs again. A writer whose run is over no
        // longer reads.
        let _ = writeln!(writers.go[id], "go");
    }
    for resume in resumes {
        resume.join().expect("resume thread");
    }
    drop(writers.go);
    for child in &mut writers.children {
        assert!(child.wait().unwrap().success());
    }
    Run {
        lines: seen,
        paused,
    }
}

/// What the writers said, and where in it a holder was paused.
struct Run {
    /// Each writer's lines, in the order they arrived.
    lines: Vec<(usize, String)>,
    /// Indices of the `holding` lines whose writer was then paused.
    paused: Vec<usize>,
}

impl Run {
    /// The writes of the holder paused at `lines[at]`: that writer's
    /// `accepted`/`rejected` lines until it holds again or is done.
    fn writes_of_paused(&self, at: usize) -> Vec<&str> {
        let id = self.lines[at].0;
        self.lines[at + 1..]
            .iter()
            .filter(|(writer, _)| *writer == id)
            .map(|(_, line)| line.as_str())
            .take_while(|line| !line.starts_with("holding") && *line != "done")
            .filter(|line| line.starts_with("accepted") || line.starts_with("rejected"))
            .collect()
    }
}

/// Checks the history and the writers' reports.
fn check(history: &[u64], run: &Run) {
    let lines = &run.lines;
    assert!(!history.is_empty());
    for pair in history.windows(2) {
        assert!(
            pair[0] <= pair[1],
            "history goes back: {} then {}",
            pair[0],
            pair[1]
        );
    }
    // Each token's writes are contiguous (no interleaving of holders).
    let mut finished = std::collections::HashSet::new();
    for pair in history.windows(2) {
        if pair[0] != pair[1] {
            assert!(
                finished.insert(pair[0]),
                "token {} wrote again after {}",
                pair[0],
                pair[1]
            );
        }
    }
    let accepted: Vec<u64> = lines
        .iter()
        .filter_map(|(_, l)| l.strip_prefix("accepted ")?.parse().ok())
        .collect();
    let mut sorted_history = history.to_vec();
    sorted_history.sort();
    let mut sorted_accepted = accepted.clone();
    sorted_accepted.sort();
    assert_eq!(
        sorted_history, sorted_accepted,
        "the store and the writers disagree"
    );
    let rejected: Vec<&String> = lines
        .iter()
        .map(|(_, l)| l)
        .filter(|l| l.starts_with("rejected"))
        .collect();
    for line in &rejected {
        assert!(
            line.ends_with("held=false"),
            "a holder with a valid lease was rejected: {line}"
        );
    }
    let errors: Vec<&String> = lines
        .iter()
        .map(|(_, l)| l)
        .filter(|l| l.starts_with("error"))
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    // Every pause happened, and each frozen holder wrote after it and had
    // every write rejected (others wrote with newer tokens meanwhile).
    assert_eq!(run.paused.len(), PAUSES, "not every pause happened");
    for &at in &run.paused {
        let writes = run.writes_of_paused(at);
        assert!(
            !writes.is_empty() && writes.iter().all(|w| w.starts_with("rejected")),
            "the holder paused at `{}` wrote {writes:?}",
            lines[at].1
        );
    }
    println!(
        "{} accepted writes, {} rejected stale writes, {} distinct tokens",
        history.len(),
        rejected.len(),
        finished.len() + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holders_are_fenced_off_in_redis() {
    let server = RedisServer::start();
    let writers = start_writers(&server.url(), "redis", "-");
    let run = tokio::task::spawn_blocking(move || drive(writers))
        .await
        .unwrap();
    let mut conn = server.connection().await;
    let history: Vec<u64> = redis::cmd("LRANGE")
        .arg("{account:7}:history")
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    check(&history, &run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holders_are_fenced_off_in_postgres() {
    let server = RedisServer::start();
    let pg = PostgresServer::start();
    let db = pg.client().await;
    db.batch_execute(
        "CREATE TABLE accounts (id BIGINT PRIMARY KEY, history BIGINT[] NOT NULL DEFAULT '{}',
                                fence_token BIGINT NOT NULL DEFAULT 0);
         INSERT INTO accounts (id) VALUES (7);",
    )
    .await
    .unwrap();
    let writers = start_writers(&server.url(), "postgres", &pg.url());
    let run = tokio::task::spawn_blocking(move || drive(writers))
        .await
        .unwrap();
    let row = db
        .query_one("SELECT history FROM accounts WHERE id = 7", &[])
        .await
        .unwrap();
    let history: Vec<i64> = row.get(0);
    let history: Vec<u64> = history.into_iter().map(|t| t as u64).collect();
    check(&history, &run);
}
