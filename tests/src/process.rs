//! Child processes of a test (the `contender`, `holder` and `fair_waiter`
//! binaries), killed when dropped, so that a failing test leaves none; and
//! the start of a server the kit runs (etcd, ZooKeeper).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// A running child process whose stdout the test reads.
pub struct Process {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl Process {
    /// Starts `program` with `args`, its stdout piped to the test.
    pub fn spawn(program: &str, args: &[String]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("spawn {program}: {err}"));
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Process { child, stdout }
    }

    /// The next line the process prints (blocking), without its newline.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read a line");
        line.trim_end().to_owned()
    }

    /// Its process id, for signals the test sends.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Kills the process at once (SIGKILL: no cleanup runs in it).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to exit successfully; the rest of its stdout.
    pub fn finish(mut self) -> String {
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).expect("read stdout");
        let status = self.child.wait().expect("wait");
        assert!(status.success(), "{status}: {rest}");
        rest
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The child `spawned` started as `what` (`etcd`, `ZooKeeper`), or a panic
/// that says how to install `program` if it is missing.
pub(crate) fn server_started(
    spawned: std::io::Result<Child>,
    what: &str,
    program: &str,
    package: &str,
) -> Child {
    match spawned {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            panic!("{program} is not installed: run scripts/test, or apt-get install {package}")
        }
        Err(err) => panic!("could not start {what}: {err}"),
    }
}

/// Waits until `ready` holds for the server `child` runs as `what`,
/// within `bound`, panicking with the end of its `log` if it exits or takes
/// longer (polled: a server has no readiness event a test can follow).
pub(crate) fn wait_ready(
    child: &mut Option<Child>,
    what: &str,
    log: &Path,
    bound: Duration,
    ready: impl Fn() -> bool,
) {
    if let Err(failed) = try_wait_ready(child, what, log, bound, ready) {
        panic!("{}", failed.told);
    }
}

/// A server that did not come up: what to tell, and whether it exited
/// because one of its ports was taken since it was found free (another
/// test's server got it first), when starting it again on others helps.
pub(crate) struct NotServing {
    pub(crate) told: String,
    pub(crate) port_taken: bool,
}

/// [`wait_ready`], answering what went wrong instead of panicking.
pub(crate) fn try_wait_ready(
    child: &mut Option<Child>,
    what: &str,
    log: &Path,
    bound: Duration,
    ready: impl Fn() -> bool,
) -> Result<(), NotServing> {
    let deadline = Instant::now() + bound;
    while !ready() {
        let exited = child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        let failed = match exited {
            Some(status) => format!("{what} exited ({status}) before serving"),
            None if Instant::now() >= deadline => format!("{what} did not serve within {bound:?}"),
            None => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        // The log goes with its temp dir: its end is told here.
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let end = lines[lines.len().saturating_sub(20)..].join("\n");
        return Err(NotServing {
            port_taken: exited.is_some() && text.to_lowercase().contains("address already in use"),
            told: format!("{failed}; the end of its log ({}):\n{end}", log.display()),
        });
    }
    Ok(())
}
