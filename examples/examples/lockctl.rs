//! `lockctl`: see who holds a lock, and break one, on any store the
//! library reaches.
//!
//! ```text
//! cargo run -p examples --example lockctl -- [--url URL] [--namespace NS] list 'order:*'
//! cargo run -p examples --example lockctl -- show order:42
//! cargo run -p examples --example lockctl -- release order:42 --force
//! cargo run -p examples --example lockctl -- [--namespace NS] schema --role ROLE
//! ```
//!
//! `schema` prints, without reaching any store, the PostgreSQL DDL of the
//! namespace's tables and the grants a role needs to lock with them (with
//! `--mysql DATABASE`, built with `--features mysql`: MySQL's, for that
//! database): for databases whose schema changes a DBA runs (the Locker
//! then finds the tables and makes none).
//!
//! The store is `--url` (any `Locker::connect` URL: `redis://`,
//! `rediss://`, `redis+sentinel://`, `redis+cluster://`, `postgres://`; `etcd://`,
//! `zk://` and `mysql://` when built with `--features etcd,zookeeper,mysql`), else `LOCK_URL`,
//! else `REDIS_URL`. `lockctl --help` and `lockctl <command> --help` say
//! more. Exit status: 0 done, 1 the store failed, 2 bad usage (a
//! `release` without `--force` too).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use lock_core::{Inspection, LockError, Locker};

/// See who holds a lock, and break one, on any store the library reaches.
#[derive(Debug, Parser)]
#[command(name = "lockctl", version)]
struct Args {
    /// The store: any `Locker::connect` URL (redis://, rediss://,
    /// redis+sentinel://, redis+cluster://, postgres://; etcd:// and zk://
    /// when built with those features). Else REDIS_URL.
    #[arg(long, global = true, env = "LOCK_URL", hide_env_values = true)]
    url: Option<String>,
    /// The Lockers' namespace.
    #[arg(long, global = true, default_value = lock_core::DEFAULT_NAMESPACE)]
    namespace: String,
    #[command(subcommand)]
    command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
enum Command {
    /// The held keys that match PATTERN (`*` any run of characters, `?` one).
    List {
        /// The keys to list, e.g. 'order:*'.
        pattern: String,
    },
    /// Each holder of KEY (process, owner, token, lease left, age) and its
    /// waiters.
    Show {
        /// The lock key, e.g. order:42.
        key: String,
    },
    /// Removes every holder and queue entry of KEY: its holders lose their
    /// leases, and fenced writes refuse their tokens.
    Release {
        /// The lock key, e.g. order:42.
        key: String,
        /// Break the lock of whoever holds it (refused without).
        #[arg(long)]
        force: bool,
    },
    /// Prints the PostgreSQL DDL of the namespace's tables and the grants a
    /// role needs to lock with them, without reaching any store.
    Schema {
        /// The role that will lock (for MySQL: `user` or `user@host`).
        #[arg(long)]
        role: String,
        /// MySQL's DDL and grants instead, for the tables in DATABASE.
        #[cfg(feature = "mysql")]
        #[arg(long, value_name = "DATABASE")]
        mysql: Option<String>,
    },
}

fn print_inspection(seen: &Inspection) {
    if !seen.is_held() {
        println!("{}: not held", seen.key);
    }
    for holder in &seen.holders {
        let shown = |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{d:.1?}"));
        println!(
            "{}: {} lock held by {} (owner {}), token {}, lease left {}, held for {}{}",
            seen.key,
            holder.kind,
            holder.process().unwrap_or_else(|| "?".to_owned()),
            holder.owner,
            holder.token,
            shown(holder.remaining),
            shown(holder.age),
            holder
                .segment
                .map_or(String::new(), |s| format!(", segment {s}")),
        );
    }
    match seen.waiters {
        Some(n) => println!("{}: {n} waiting", seen.key),
        None => println!("{}: waiters not known to this store", seen.key),
    }
}

async fn run(url: &str, args: Args) -> Result<(), LockError> {
    let builder = Locker::builder().label("lockctl");
    let locker = builder.namespace(args.namespace).connect(url).await?;
    match args.command {
        Command::List { pattern } => {
            for key in locker.held_keys(&pattern).await? {
                println!("{key}");
            }
        }
        Command::Show { key } => print_inspection(&locker.inspect(&key).await?),
        // Printed before any store is reached (see `main`).
        Command::Schema { .. } => {}
        Command::Release { key, .. } => {
            print_inspection(&locker.inspect(&key).await?);
            let forced = locker.force_release(&key).await?;
            let removed = forced.removed;
            print!("{key}: removed {removed} holders and queue entries");
            match forced.tokens_up_to {
                Some(token) => println!("; the next holder's token is above {token}"),
                None => println!(),
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    // Warnings (a force-release's) to stderr; RUST_LOG for more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    // Usage errors exit with 2, `--help` with 0.
    let args = Args::parse();
    if let Command::Release { force: false, .. } = &args.command {
        eprintln!("release breaks the lock of whoever holds it: add --force");
        return ExitCode::from(2);
    }
    if let Command::Schema { role, .. } = &args.command {
        #[cfg(feature = "mysql")]
        let printed = match &args.command {
            Command::Schema {
                mysql: Some(database),
                ..
            } => lock_core::backend::MysqlBackend::schema_sql(&args.namespace, database, role),
            _ => lock_core::backend::PostgresBackend::schema_sql(&args.namespace, role),
        };
        #[cfg(not(feature = "mysql"))]
        let printed = lock_core::backend::PostgresBackend::schema_sql(&args.namespace, role);
        return match printed {
            Ok((ddl, grants)) => {
                println!("{ddl}\n{grants}");
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {err}");
                ExitCode::from(2)
            }
        };
    }
    let url = (args.url.clone()).or_else(|| std::env::var("REDIS_URL").ok());
    let Some(url) = url else {
        eprintln!("no store: give --url, or set LOCK_URL or REDIS_URL");
        return ExitCode::from(2);
    };
    match run(&url, args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}
