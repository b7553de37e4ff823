//! The command line, as clap parses it: the store, the namespace and one
//! command.

use std::time::Duration;

use clap::{Parser, Subcommand};

/// See who holds the locks of lock-core, watch them change, and break one,
/// on any store the build reaches.
///
/// Exit status: 0 done; 1 an error (the store, the URL, the output); 2 a
/// refusal (bad usage, no store given, `release` without `--force`); 3 the
/// key is not held (`show`, `release`) or the election has no leader
/// (`leader`).
#[derive(Debug, Parser)]
#[command(name = "lockctl", version, max_term_width = 80)]
pub struct Args {
    /// The store: a `Locker::connect` URL (redis://, rediss://,
    /// redis+sentinel://, redis+cluster://, postgres://, mysql://, zk://,
    /// etcd://, as the build's features allow).
    #[arg(long, global = true, env = "LOCK_URL", hide_env_values = true)]
    pub url: Option<String>,
    /// The Lockers' namespace.
    #[arg(long, global = true, default_value = lock_core::DEFAULT_NAMESPACE)]
    pub namespace: String,
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The held keys that match PATTERN (`*` any run of characters, `?`
    /// one), one per line.
    List {
        /// The keys to list, e.g. 'order:*'.
        pattern: String,
        /// One JSON document: {"pattern", "keys"}.
        #[arg(long)]
        json: bool,
    },
    /// Each holder of KEY (kind, process, token, lease left, age) and its
    /// waiters. Exits with 3 when no one holds it.
    Show {
        /// The lock key, e.g. order:42.
        key: String,
        /// One JSON document: {"key", "held", "holders", "waiters"}.
        #[arg(long)]
        json: bool,
    },
    /// Who leads the election on KEY: their process, published value and
    /// term's token. Exits with 3 when no one leads.
    Leader {
        /// The election's key, e.g. scheduler.
        key: String,
        /// One JSON document: {"key", "leader"}, the leader null if none.
        #[arg(long)]
        json: bool,
    },
    /// The held keys that match PATTERN, with their holders, tokens, lease
    /// left and waiters, redrawn every second with what changed since the
    /// frame before. Ends on Ctrl-C, or after --count frames.
    Watch {
        /// The keys to watch, e.g. 'order:*'.
        pattern: String,
        /// Ends after N frames (1 or more).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        count: Option<u64>,
        /// Seconds between frames, from 0.1 to 3600.
        #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = seconds)]
        every: Duration,
        /// Most keys shown in a frame (the first, in order).
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
    },
    /// Removes every holder and queue entry of KEY and says what it
    /// removed: its holders lose their leases, and fenced writes refuse
    /// their tokens. Refused (exit 2) without --force; exits with 3 when
    /// nothing was held.
    Release {
        /// The lock key, e.g. order:42.
        key: String,
        /// Break the lock of whoever holds it.
        #[arg(long)]
        force: bool,
    },
    /// Prints the DDL of the namespace's tables and the grants a role needs
    /// to lock with them (PostgreSQL; MySQL with --mysql), without reaching
    /// any store: for databases whose schema changes a DBA runs.
    Schema {
        /// The role that will lock (for MySQL: `user` or `user@host`).
        #[arg(long)]
        role: String,
        /// MySQL's DDL and grants instead, for the tables in DATABASE.
        #[arg(long, value_name = "DATABASE")]
        mysql: Option<String>,
    },
    /// Prints a completion script for SHELL, e.g. `lockctl completions
    /// bash > /etc/bash_completion.d/lockctl`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `--every`: a number of seconds from 0.1 to 3600.
fn seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("{secs} s is not between 0.1 and 3600"));
    }
    Ok(Duration::from_secs_f64(secs))
}
