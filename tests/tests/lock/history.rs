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
/// Twice the writers' 300 ms lease.
const PAUSE: Duration = Duration::from_millis(600);

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
fn drive(mut writers: Writers) -> Vec<(usize, String)> {
    let mut seen = Vec::new();
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
    seen
}

/// Checks the history and the writers' reports.
fn check(history: &[u64], lines: &[(usize, String)]) {
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
    assert!(
        !rejected.is_empty(),
        "no paused holder tried to write after losing its lease"
    );
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
    let lines = tokio::task::spawn_blocking(move || drive(writers))
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
    check(&history, &lines);
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
    let lines = tokio::task::spawn_blocking(move || drive(writers))
        .await
        .unwrap();
    let row = db
        .query_one("SELECT history FROM accounts WHERE id = 7", &[])
        .await
        .unwrap();
    let history: Vec<i64> = row.get(0);
    let history: Vec<u64> = history.into_iter().map(|t| t as u64).collect();
    check(&history, &lines);
}
