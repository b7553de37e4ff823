//! lockctl's exit status, as its `--help` documents it.

use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done.
    Done,
    /// 1: an error: the store failed or refused, or the URL is wrong.
    Error,
    /// 2: a refusal: bad usage, or `release` without `--force` (clap's
    /// usage errors exit with 2 as well).
    Refused,
    /// 3: the key is not held, or the election has no leader, where the
    /// command says so (`show`, `leader`, `release`).
    NotHeld,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(match exit {
            Exit::Done => 0,
            Exit::Error => 1,
            Exit::Refused => 2,
            Exit::NotHeld => 3,
        })
    }
}
