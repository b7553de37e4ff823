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
//! namespace's tables and the grants a role needs to lock with them: for
//! databases whose schema changes a DBA runs (the Locker then finds the
//! tables and makes none).
//!
//! The store is `--url` (any `Locker::connect` URL: `redis://`,
//! `rediss://`, `redis+sentinel://`, `redis+cluster://`; `etcd://` and
//! `zk://` when built with `--features etcd,zookeeper`), else `LOCK_URL`,
//! else `REDIS_URL`. Exit status: 0 done, 1 the store
//! failed, 2 bad usage.

use std::process::ExitCode;
use std::time::Duration;

use lock_core::{Inspection, LockError, Locker};

const USAGE: &str = "usage: lockctl [--url URL] [--namespace NS] \
     (list PATTERN | show KEY | release KEY --force | schema --role ROLE)";

/// What to do, from the command line.
#[derive(Debug)]
enum Command {
    List(String),
    Show(String),
    Release(String),
    Schema { role: String },
}

#[derive(Debug)]
struct Args {
    url: Option<String>,
    namespace: Option<String>,
    command: Command,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let (mut url, mut namespace, mut words, mut force) = (None, None, Vec::new(), false);
    let mut role = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--url" => url = Some(args.next().ok_or("--url needs a URL")?),
            "--namespace" => namespace = Some(args.next().ok_or("--namespace needs a name")?),
            "--force" => force = true,
            "--role" => role = Some(args.next().ok_or("--role needs a role name")?),
            "-h" | "--help" => return Err(USAGE.to_owned()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ => words.push(arg),
        }
    }
    let command = match words.as_slice() {
        [verb, key] if verb == "list" => Command::List(key.clone()),
        [verb, key] if verb == "show" => Command::Show(key.clone()),
        [verb, key] if verb == "release" && force => Command::Release(key.clone()),
        [verb] if verb == "schema" => Command::Schema {
            role: role.ok_or("schema needs the role that will lock: add --role ROLE")?,
        },
        [verb, _] if verb == "release" => {
            return Err("release breaks the lock of whoever holds it: add --force".to_owned());
        }
        _ => return Err(USAGE.to_owned()),
    };
    Ok(Args {
        url,
        namespace,
        command,
    })
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
    let mut builder = Locker::builder().label("lockctl");
    if let Some(namespace) = args.namespace {
        builder = builder.namespace(namespace);
    }
    let locker = builder.connect(url).await?;
    match args.command {
        Command::List(pattern) => {
            for key in locker.held_keys(&pattern).await? {
                println!("{key}");
            }
        }
        Command::Show(key) => print_inspection(&locker.inspect(&key).await?),
        // Printed before any store is reached (see `main`).
        Command::Schema { .. } => {}
        Command::Release(key) => {
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
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if let Command::Schema { role } = &args.command {
        let namespace = args
            .namespace
            .as_deref()
            .unwrap_or(lock_core::DEFAULT_NAMESPACE);
        return match lock_core::backend::PostgresBackend::schema_sql(namespace, role) {
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
    let url = (args.url.clone())
        .or_else(|| std::env::var("LOCK_URL").ok())
        .or_else(|| std::env::var("REDIS_URL").ok());
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
