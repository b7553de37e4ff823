//! A lock holder that writes through a fence, in its own OS process, so
//! that a test can pause it (SIGSTOP) inside its critical section.
//!
//! `fenced_writer <redis-url> <redis|postgres> <postgres-url|-> <millis>`:
//! until `millis` pass, takes `account:7` (ttl 300 ms), prints
//! `holding <token>`, waits for a line on stdin (the driver pauses it in
//! between, if it wants to), then appends its token twice to the account's
//! history through the fence and prints `accepted <token>` or
//! `rejected <token> held=<bool>` for each write.

use std::io::Write;
use std::time::Duration;

use lock_core::fence::RedisFence;
use lock_core::fence::postgres::PgFence;
use lock_core::{FencingToken, LockError, Locker};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::time::Instant;

enum Store {
    Redis(RedisFence<redis::aio::MultiplexedConnection>),
    Postgres(tokio_postgres::Client, PgFence),
}

impl Store {
    async fn append(&self, token: FencingToken) -> Result<(), LockError> {
        match self {
            Store::Redis(fence) => {
                let mut cmd = redis::cmd("RPUSH");
                cmd.arg("{account:7}:history").arg(token.get());
                fence
                    .run("{account:7}:history", token, &cmd)
                    .await
                    .map(drop)
            }
            Store::Postgres(db, accounts) => {
                let t = token.get() as i64;
                accounts
                    .update(
                        db,
                        token,
                        &7_i64,
                        "history = array_append(history, $1)",
                        &[&t],
                    )
                    .await
                    .map(drop)
            }
        }
    }
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, redis_url, kind, pg_url, millis] = args.as_slice() else {
        eprintln!("usage: fenced_writer <redis-url> <redis|postgres> <postgres-url|-> <millis>");
        std::process::exit(2);
    };
    let until = Instant::now() + Duration::from_millis(millis.parse().expect("millis"));
    let locker = Locker::redis(redis_url).await.expect("lock store");
    let store = if kind == "postgres" {
        let (db, connection) = tokio_postgres::connect(pg_url, tokio_postgres::NoTls)
            .await
            .expect("postgres");
        tokio::spawn(connection);
        Store::Postgres(
            db,
            PgFence::new("accounts", "id", "fence_token").expect("table"),
        )
    } else {
        let conn = redis::Client::open(redis_url.as_str())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("data connection");
        Store::Redis(RedisFence::new(conn))
    };
    let mut go = BufReader::new(tokio::io::stdin()).lines();
    while Instant::now() < until {
        let guard = match locker
            .lock("account:7")
            .ttl(Duration::from_millis(300))
            .wait(Duration::from_secs(10))
            .await
        {
            Ok(guard) => guard,
            Err(err) => {
                say(format!("acquire failed: {err}"));
                continue;
            }
        };
        let token = guard.token();
        say(format!("holding {token}"));
        // The driver answers once it has paused this process or chosen not
        // to: the writes never start before a pause meant to precede them.
        let _ = go.next_line().await;
        for _ in 0..2 {
            match store.append(token).await {
                Ok(()) => say(format!("accepted {token}")),
                Err(LockError::StaleToken { .. }) => {
                    say(format!("rejected {token} held={}", guard.is_held()));
                }
                Err(err) => say(format!("error {token}: {err}")),
            }
        }
        let _ = guard.release().await;
    }
    say("done".into());
}
