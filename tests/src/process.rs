//! Child processes of a test (the `contender`, `holder` and `fair_waiter`
//! binaries), killed when dropped, so that a failing test leaves none.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};

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
