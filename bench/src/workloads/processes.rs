//! C8p: C8 as 4 processes x 2 tasks. The children are this program run as
//! `lock-bench child c8p ...`; they share the board file and report their
//! tallies as JSON on stdout.

use std::process::Stdio;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::time::Instant;

use super::CommandCount;
use super::board::{Board, BoardFile};
use super::contention::{RUN_FOR, Tally, contend};
use crate::stats::Row;
use crate::subject::Subject;

const PROCESSES: u64 = 4;
const TASKS_PER_PROCESS: u64 = 2;

struct Worker {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    async fn line(&mut self) -> String {
        self.lines
            .next_line()
            .await
            .expect("child stdout")
            .expect("child exited early")
    }
}

/// C8p for `subject` (Redis subjects only: memory is one process).
pub async fn c8p(subject: &Subject, url: &str, client: &redis::Client) -> Row {
    let file = BoardFile::create();
    let path = file.path();
    let exe = std::env::current_exe().expect("own executable");
    let mut workers = Vec::new();
    for process in 0..PROCESSES {
        let first_task = process * TASKS_PER_PROCESS + 1;
        let mut child = Command::new(&exe)
            .arg("child")
            .arg("c8p")
            .arg(subject.label())
            .arg(url)
            .arg(&path)
            .arg(first_task.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn a C8p child");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut worker = Worker {
            child,
            lines: BufReader::new(stdout).lines(),
        };
        assert_eq!(worker.line().await, "ready");
        workers.push(worker);
    }
    let count = CommandCount::start(client, subject).await;
    let started = Instant::now();
    for worker in &mut workers {
        let stdin = worker.child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(b"go\n").await.expect("child stdin");
        stdin.flush().await.expect("child stdin");
    }
    let mut tally = Tally::default();
    for worker in &mut workers {
        let report = worker.line().await;
        tally.merge(serde_json::from_str(&report).expect("child tally"));
    }
    let elapsed = started.elapsed();
    for mut worker in workers {
        worker.child.wait().await.expect("child exit");
    }
    let acquisitions = tally.acquisitions();
    let mut row = tally.row("C8p", subject, &file.open(), elapsed);
    row.commands = super::per_acquisition(count, acquisitions).await;
    row
}

/// The child side: `<subject> <url> <board> <first task>`.
pub async fn child(args: &[String]) {
    let [label, url, board, first_task] = args else {
        panic!("usage: lock-bench child c8p <subject> <url> <board> <first task>");
    };
    let subject = Subject::by_label(label, url).await;
    let board = Arc::new(Board::open(board.as_ref()));
    let first_task: u64 = first_task.parse().expect("first task");
    // Connect before the start, as a service would have.
    subject.lock("c8p:warm").await.release().await;
    println!("ready");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let go = stdin.next_line().await.expect("stdin");
    assert_eq!(go.as_deref(), Some("go"));
    let tally = contend(
        &subject,
        &board,
        first_task,
        TASKS_PER_PROCESS as usize,
        RUN_FOR,
    )
    .await;
    println!("{}", serde_json::to_string(&tally).expect("tally"));
}
