//! Why fencing tokens: a holder that stalls past its lease, for real.
//!
//! ```text
//! cargo run -p examples --example fencing_postgres
//! ```
//!
//! Starts its own PostgreSQL and Redis (as the test kit does) unless
//! `DATABASE_URL` / `REDIS_URL` are set. Then three times - without
//! fencing, with fencing tokens, and with the lock in PostgreSQL itself and
//! the write checked in under it:
//!
//! 1. Holder A (a child process) locks `account:7` with a 1 s lease and
//!    reads the balance (100).
//! 2. A is frozen with SIGSTOP: its watchdog cannot renew, the lease runs out.
//! 3. B locks `account:7` (a newer token), adds 50, writes 150, releases.
//! 4. A is thawed (SIGCONT) and writes what it computed from its stale read:
//!    100 - 30 = 70.
//!
//! Without fencing A's write silently overwrites B's: the +50 is lost.
//! With fencing (`UPDATE ... WHERE fence_token <= $token`) A's write is
//! rejected as stale, A learns its lease was lost, re-acquires and redoes
//! the work on fresh data: 150 - 30 = 120. With the lock in the same
//! database, A's transaction checks in under its lease
//! (`guard.check_in(&transaction)`), which is refused: no token column is
//! needed, and again 120.

use std::process::Stdio;
use std::time::Duration;

use lock_core::fence::postgres::PgFence;
use lock_core::{LockError, LockGuard, Locker};
use lock_testkit::{PostgresServer, RedisServer, send_signal};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_postgres::{Client, NoTls};

const LEASE: Duration = Duration::from_secs(1);

async fn connect(url: &str) -> Result<Client, Box<dyn std::error::Error>> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

async fn balance(db: &Client) -> Result<i64, tokio_postgres::Error> {
    Ok(db
        .query_one("SELECT balance FROM accounts WHERE id = 7", &[])
        .await?
        .get(0))
}

/// How a holder's write is kept from landing after its lease.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Not at all.
    Unfenced,
    /// A fencing token column the write is checked against.
    Fenced,
    /// The lock in the same database, the write checked in under it.
    CheckedIn,
    /// The same, the write through sqlx (feature `sqlx`).
    #[cfg(feature = "sqlx")]
    CheckedInSqlx,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unfenced => "unfenced",
            Mode::Fenced => "fenced",
            Mode::CheckedIn => "checked-in",
            #[cfg(feature = "sqlx")]
            Mode::CheckedInSqlx => "checked-in-sqlx",
        }
    }

    fn of(name: &str) -> Self {
        match name {
            "fenced" => Mode::Fenced,
            "checked-in" => Mode::CheckedIn,
            #[cfg(feature = "sqlx")]
            "checked-in-sqlx" => Mode::CheckedInSqlx,
            _ => Mode::Unfenced,
        }
    }

    /// The Locker of this mode: on Redis, or on the database itself.
    async fn locker(self, redis_url: &str, pg_url: &str) -> Result<Locker, LockError> {
        match self {
            Mode::Unfenced | Mode::Fenced => Locker::redis(redis_url).await,
            _ => Locker::builder().postgres(pg_url).await,
        }
    }
}

/// Writes `value` as the holder of `guard`, as `mode` says (`pg_url`: the
/// database, for the sqlx connection).
async fn write(
    db: &mut Client,
    pg_url: &str,
    mode: Mode,
    guard: &LockGuard,
    value: i64,
) -> Result<(), LockError> {
    // Only the sqlx mode opens a connection of its own.
    let _ = pg_url;
    let failed = |e| LockError::Unavailable {
        key: "accounts[7]".into(),
        op: lock_core::Operation::FencedWrite,
        source: lock_core::StoreError::in_doubt(e),
    };
    match mode {
        Mode::Fenced => {
            let accounts = PgFence::new("accounts", "id", "fence_token")?;
            accounts
                .update(&*db, guard.token(), &7_i64, "balance = $1", &[&value])
                .await
                .map(drop)
        }
        Mode::Unfenced => db
            .execute("UPDATE accounts SET balance = $1 WHERE id = 7", &[&value])
            .await
            .map(drop)
            .map_err(failed),
        Mode::CheckedIn => {
            let transaction = db.transaction().await.map_err(failed)?;
            guard.check_in(&transaction).await?;
            transaction
                .execute("UPDATE accounts SET balance = $1 WHERE id = 7", &[&value])
                .await
                .map_err(failed)?;
            transaction.commit().await.map_err(failed)
        }
        #[cfg(feature = "sqlx")]
        Mode::CheckedInSqlx => {
            use sqlx::Connection;
            let sqlx_failed = |e| LockError::Unavailable {
                key: "accounts[7]".into(),
                op: lock_core::Operation::FencedWrite,
                source: lock_core::StoreError::in_doubt(e),
            };
            let mut connection = sqlx::PgConnection::connect(pg_url)
                .await
                .map_err(sqlx_failed)?;
            let mut transaction = connection.begin().await.map_err(sqlx_failed)?;
            guard.check_in(&mut transaction).await?;
            sqlx::query("UPDATE accounts SET balance = $1 WHERE id = 7")
                .bind(value)
                .execute(&mut *transaction)
                .await
                .map_err(sqlx_failed)?;
            transaction.commit().await.map_err(sqlx_failed)
        }
    }
}

/// Holder A, in its own process so that it can really be frozen.
async fn holder_a(
    redis_url: &str,
    pg_url: &str,
    mode: Mode,
) -> Result<(), Box<dyn std::error::Error>> {
    let locker = mode.locker(redis_url, pg_url).await?;
    let mut db = connect(pg_url).await?;
    let guard = locker.lock("account:7").ttl(LEASE).await?;
    let read = balance(&db).await?;
    println!(
        "A: locked account:7 with token {}, read balance {read}",
        guard.token()
    );
    // Wait for the parent's go (it freezes us first).
    let mut line = String::new();
    BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await?;
    println!(
        "A: resumed; lease still held by my clock? {}",
        guard.is_held()
    );
    // Checking is_held() before writing would not help: the pause can come
    // between the check and the write. Only the store can decide.
    println!("A: writing balance {} (100 - 30, from my read)", read - 30);
    match write(&mut db, pg_url, mode, &guard, read - 30).await {
        Ok(()) => println!("A: write accepted"),
        Err(err @ (LockError::StaleToken { .. } | LockError::Lost { .. })) => {
            println!("A: write REJECTED: {err}");
            let _ = guard.release().await;
            let again = locker.lock("account:7").ttl(LEASE).await?;
            let fresh = balance(&db).await?;
            println!(
                "A: re-locked with token {}, read {fresh}, writing {}",
                again.token(),
                fresh - 30
            );
            write(&mut db, pg_url, mode, &again, fresh - 30).await?;
            again.release().await?;
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    }
    if let Err(err) = guard.release().await {
        println!("A: release reports: {err}");
    }
    Ok(())
}

async fn round(
    redis_url: &str,
    pg_url: &str,
    mode: Mode,
) -> Result<i64, Box<dyn std::error::Error>> {
    let mut db = connect(pg_url).await?;
    db.execute(
        "UPDATE accounts SET balance = 100, fence_token = 0 WHERE id = 7",
        &[],
    )
    .await?;
    println!("\n=== {}: balance 100 ===", mode.name());
    let mut a = tokio::process::Command::new(std::env::current_exe()?)
        .args(["--holder-a", redis_url, pg_url, mode.name()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut a_out = BufReader::new(a.stdout.take().ok_or("no stdout")?).lines();
    let first = a_out.next_line().await?.ok_or("A said nothing")?;
    println!("{first}");
    let pid = a.id().ok_or("A exited")?;
    send_signal(pid, libc::SIGSTOP);
    println!(
        "-- A is frozen (SIGSTOP): it cannot renew its {}s lease",
        LEASE.as_secs()
    );

    let locker = mode.locker(redis_url, pg_url).await?;
    let b = locker
        .lock("account:7")
        .wait(Duration::from_secs(10))
        .await?;
    let read = balance(&db).await?;
    println!(
        "B: locked account:7 once A's lease ran out, token {} (newer), read {read}",
        b.token()
    );
    write(&mut db, pg_url, mode, &b, read + 50).await?;
    println!("B: wrote balance {} and released", read + 50);
    b.release().await?;

    send_signal(pid, libc::SIGCONT);
    println!("-- A is thawed (SIGCONT)");
    let mut stdin = a.stdin.take().ok_or("no stdin")?;
    stdin.write_all(b"go\n").await?;
    while let Some(line) = a_out.next_line().await? {
        println!("{line}");
    }
    a.wait().await?;
    let end = balance(&db).await?;
    println!("final balance: {end}");
    Ok(end)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--holder-a") {
        return holder_a(&args[2], &args[3], Mode::of(&args[4])).await;
    }
    let (_redis, redis_url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    };
    let (_pg, pg_url) = match std::env::var("DATABASE_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let server = PostgresServer::start();
            let url = server.postgres_url();
            (Some(server), url)
        }
    };
    let db = connect(&pg_url).await?;
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL,
                                              fence_token BIGINT NOT NULL DEFAULT 0);
         INSERT INTO accounts (id, balance) VALUES (7, 100) ON CONFLICT (id) DO NOTHING;",
    )
    .await?;
    let unfenced = round(&redis_url, &pg_url, Mode::Unfenced).await?;
    println!(
        "=> without fencing: {unfenced}, but 100 + 50 - 30 = 120: B's +50 was silently lost (lost update)"
    );
    let fenced = round(&redis_url, &pg_url, Mode::Fenced).await?;
    println!(
        "=> with fencing: {fenced}: A's stale write was rejected, A redid its work on fresh data"
    );
    let checked = round(&redis_url, &pg_url, Mode::CheckedIn).await?;
    println!(
        "=> checked in under a PostgreSQL lease: {checked}: A's transaction was refused without \
         any token column, A redid its work on fresh data"
    );
    #[cfg(feature = "sqlx")]
    {
        let checked = round(&redis_url, &pg_url, Mode::CheckedInSqlx).await?;
        println!("=> the same through a sqlx transaction: {checked}");
    }
    Ok(())
}
