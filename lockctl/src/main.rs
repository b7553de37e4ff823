//! `lockctl`: see who holds the locks of lock-core, watch them change, and
//! break one, on any store the build reaches.
//!
//! ```text
//! lockctl [--url URL] [--namespace NS] list 'order:*' [--json]
//! lockctl show order:42 [--json]
//! lockctl watch 'order:*' [--count N] [--every SECONDS]
//! lockctl leader scheduler [--json]
//! lockctl release order:42 --force
//! lockctl schema --role locker [--mysql DATABASE]
//! lockctl completions bash
//! ```
//!
//! The store is `--url`, else `LOCK_URL`, else `REDIS_URL`. Nothing but
//! `release --force` changes a lock (on PostgreSQL and MySQL lockctl never
//! makes tables either). Exit status: 0 done, 1 an error, 2 a refusal
//! (bad usage, `release` without `--force`), 3 not held (`show`,
//! `release`) or no leader (`leader`). Logs go to stderr, coloured only on
//! a terminal; `RUST_LOG` sets how much.

mod args;
mod commands;
mod connect;
mod exit;
mod json;
mod output;
mod table;
mod text;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use lock_core::LockError;

use args::{Args, Command};
use commands::{leader, list, release, schema, show, watch};
use exit::Exit;

/// The command that needs a store, run on it.
async fn on_store(url: &str, args: Args) -> Result<Exit, Box<dyn std::error::Error>> {
    let locker = connect::locker(url, &args.namespace).await?;
    let done = match args.command {
        Command::List { pattern, json } => list::run(&locker, &pattern, json).await,
        Command::Show { key, json } => show::run(&locker, &key, json).await,
        Command::Leader { key, json } => leader::run(&locker, &key, json).await,
        Command::Watch {
            pattern,
            count,
            every,
            limit,
        } => watch::run(&locker, &pattern, count, every, limit).await,
        Command::Release { key, .. } => release::run(&locker, &key).await,
        // Answered in `main`, without a store.
        Command::Schema { .. } | Command::Completions { .. } => Ok(Exit::Done),
    };
    Ok(done?)
}

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings (a force-release's) to stderr; RUST_LOG for more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    // Usage errors exit with 2, `--help` and `--version` with 0.
    let args = Args::parse();
    match &args.command {
        Command::Release { force: false, .. } => {
            output::warn("release breaks the lock of whoever holds it: add --force");
            return Exit::Refused.into();
        }
        Command::Schema { role, mysql } => {
            return schema::run(&args.namespace, role, mysql.as_deref()).into();
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Args::command(), "lockctl", &mut script);
            output::emit(&String::from_utf8_lossy(&script));
            return Exit::Done.into();
        }
        _ => {}
    }
    let Some(url) = connect::url(args.url.clone()) else {
        output::warn("no store: give --url, or set LOCK_URL or REDIS_URL");
        return Exit::Refused.into();
    };
    match on_store(&url, args).await {
        Ok(exit) => exit.into(),
        Err(err) => {
            output::report(&*err);
            if let Some(LockError::UnsupportedScheme { scheme, .. }) = err.downcast_ref() {
                output::warn(&format!(
                    "  this lockctl reaches no `{scheme}://` store: install one that does, e.g. \
                     `cargo install --path lockctl --features etcd`"
                ));
            }
            Exit::Error.into()
        }
    }
}
