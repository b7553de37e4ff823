//! The PostgreSQL store's own promises, beyond the conformance suite
//! (which runs on it too): what connecting checks and tells, the printed
//! schema run by hand and locked under exactly the rights it grants,
//! tokens that rise across a restart of the server, and locking through a
//! transaction-pooling PgBouncer that carries no `LISTEN`.

use std::time::Duration;

use lock_core::backend::{Attempt, LockStore, PostgresBackend};
use lock_core::{LockError, LockKind, Locker};
use lock_testkit::{Counting, PgBouncer, PostgresServer, TestStore, error_chain};
use tokio::time::Instant;

async fn locker(server: &PostgresServer) -> Result<Locker, LockError> {
    Locker::connect(&server.postgres_url()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_makes_the_schema_once_and_tells_what_to_fix() {
    let server = PostgresServer::start();
    // Two Lockers connecting at once make the tables once, between them.
    let (a, b) = tokio::join!(locker(&server), locker(&server));
    let (a, b) = (a.expect("first Locker"), b.expect("second Locker"));
    let guard = a.lock("order:1").await.unwrap();
    assert!(b.try_lock("order:1").await.unwrap().is_none());
    guard.release().await.unwrap();

    let url = format!("{}?pgbouncer=yes", server.postgres_url());
    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(error_chain(&err).contains("pgbouncer=true"), "{err}");

    let url = format!("postgres://postgres@127.0.0.1:{}/nope", server.port());
    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(
        error_chain(&err).contains("database the URL names does not exist"),
        "{}",
        error_chain(&err)
    );

    let err = Locker::connect("postgres://postgres@127.0.0.1:notaport/x")
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(
        error_chain(&err).contains("postgres://[user[:password]@]host"),
        "{}",
        error_chain(&err)
    );

    let long = Locker::builder().namespace("n".repeat(64));
    let err = long.postgres(&server.postgres_url()).await.unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");

    // Older functions over the same tables are replaced at connect.
    let admin = server.client().await;
    admin
        .batch_execute("DROP FUNCTION lock.force_release_all(text, text[])")
        .await
        .unwrap();
    let upgraded = locker(&server).await.expect("older functions are replaced");
    let forced = upgraded.force_release("order:nothing").await.unwrap();
    assert_eq!(forced.removed, 0);
    // Tables of another format are refused, never reused.
    admin
        .batch_execute("UPDATE lock.format SET version = 3")
        .await
        .unwrap();
    let err = locker(&server).await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::UnknownFormat {
                stored: 3,
                ours: 2,
                ..
            }
        ),
        "{err}"
    );
    // Tables dropped under a connected Locker: told at once, not retried
    // until the wait runs out.
    admin
        .batch_execute("DROP SCHEMA lock CASCADE")
        .await
        .unwrap();
    let started = Instant::now();
    let err = b
        .lock("order:2")
        .wait(Duration::from_secs(20))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::UnknownFormat { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10), "{err}");
}

/// A wrong password and a missing one are told at connect, by what to fix;
/// the right one locks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_are_checked_at_connect() {
    let server = PostgresServer::start();
    server.require_password("guarded", "s3cret").await;
    let url = |auth: &str| format!("postgres://{auth}@127.0.0.1:{}/postgres", server.port());
    let err = Locker::connect(&url("guarded:wrong")).await.unwrap_err();
    assert!(
        matches!(err, LockError::AuthenticationFailed { .. }),
        "{err}"
    );
    assert!(
        error_chain(&err).contains("fix them in the URL"),
        "{}",
        error_chain(&err)
    );
    let err = Locker::connect(&url("guarded")).await.unwrap_err();
    assert!(
        matches!(err, LockError::PasswordRequired { .. }),
        "{}",
        error_chain(&err)
    );
    let locker = Locker::connect(&url("guarded:s3cret"))
        .await
        .expect("the right password");
    locker
        .lock("order:5")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_schema_and_grants_are_all_a_locking_role_needs() {
    let server = PostgresServer::start();
    let admin = server.client().await;
    // Told not to make the tables, a Locker finds none and says what to run.
    let not_made = format!("{}?create_schema=false", server.postgres_url());
    let err = Locker::connect(&not_made).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(error_chain(&err).contains("lockctl schema"), "{err}");
    let (ddl, grants) = PostgresBackend::schema_sql("lock", "locker").unwrap();
    admin
        .batch_execute(&ddl)
        .await
        .expect("the printed DDL runs");
    admin
        .batch_execute("CREATE ROLE locker LOGIN; CREATE ROLE stranger LOGIN")
        .await
        .unwrap();
    admin
        .batch_execute(&grants)
        .await
        .expect("the printed grants run");

    let as_role = |role: &str| {
        format!(
            "postgres://{role}@127.0.0.1:{}/postgres?create_schema=false",
            server.port()
        )
    };
    let one = Locker::connect(&as_role("locker"))
        .await
        .expect("the granted role connects");
    let two = Locker::connect(&as_role("locker")).await.unwrap();
    let first = one.lock("order:7").await.unwrap();
    let waiter =
        tokio::spawn(async move { two.lock("order:7").wait(Duration::from_secs(10)).await });
    let token = first.token();
    first.release().await.unwrap();
    let second = waiter.await.unwrap().expect("the waiter gets the lock");
    assert!(second.token() > token);
    assert_eq!(one.inspect("order:7").await.unwrap().holders.len(), 1);
    assert_eq!(one.force_release("order:7").await.unwrap().removed, 1);
    // Every other kind too, and a release that comes before its acquire.
    let fair = one.fair_lock("order:8").await.unwrap();
    let read = one.read_lock("order:8").await.unwrap();
    let permit = one.semaphore("order:8", 2).await.unwrap();
    let segment = one.striped("order:8", 2).await.unwrap();
    assert_eq!(one.inspect("order:8").await.unwrap().holders.len(), 4);
    for guard in [fair, read, permit, segment] {
        guard.release().await.unwrap();
    }
    drop(second);
    let backend = PostgresBackend::connect(&as_role("locker"), "lock", Duration::from_secs(2))
        .await
        .unwrap();
    // A release that reaches the server before its acquire (held up in a
    // pooler, or on another connection) leaves that acquire nothing to take.
    let keys = one.stored_keys("order:9").unwrap();
    let ttl = Duration::from_secs(30);
    for (kind, owner) in [(LockKind::Exclusive, "late-1"), (LockKind::Fair, "late-2")] {
        assert!(!backend.release(&keys, kind, owner).await.unwrap());
        let late = backend.acquire(&keys, kind, owner, ttl).await.unwrap();
        assert!(!matches!(late, Attempt::Acquired(_)), "{kind}: {late:?}");
    }
    assert!(!one.inspect("order:9").await.unwrap().is_held());

    // Rows that ended long ago on names nobody locks again are swept, by
    // the role itself (each Locker runs the sweep once a minute).
    admin
        .batch_execute(
            "INSERT INTO lock.leases VALUES ('old', 'o', 1, now() - interval '2 minutes', now());
             INSERT INTO lock.holders VALUES ('old', 'o', 'r', 2, now() - interval '2 minutes',
                                              now(), 0, 0, 0);
             UPDATE lock.gone SET until = now() - interval '1 second'",
        )
        .await
        .unwrap();
    let (role, connection) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=locker dbname=postgres",
            server.port()
        ),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let swept: i64 = role
        .query_one("SELECT lock.sweep()", &[])
        .await
        .unwrap()
        .get(0);
    assert!(
        swept >= 4,
        "two old rows and the buried owner values: {swept}"
    );
    let left: i64 = role
        .query_one(
            "SELECT (SELECT count(*) FROM lock.leases WHERE name = 'old')
                  + (SELECT count(*) FROM lock.holders WHERE name = 'old')
                  + (SELECT count(*) FROM lock.gone)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0);

    // A role without the grants is told at connect, with what to do.
    let err = Locker::connect(&as_role("stranger")).await.unwrap_err();
    assert!(matches!(err, LockError::PermissionDenied { .. }), "{err}");
    assert!(
        error_chain(&err).contains("lockctl schema"),
        "{}",
        error_chain(&err)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_a_restart_of_the_server() {
    let server = PostgresServer::start();
    let locker = Locker::builder()
        .wait(Duration::from_secs(20))
        .postgres(&server.postgres_url())
        .await
        .unwrap();
    let before = locker.lock("order:9").await.unwrap();
    let token = before.token();
    before.release().await.unwrap();
    server.restart();
    // The pool's connections broke with the restart; the next lock goes on
    // through new ones.
    let after = locker
        .lock("order:9")
        .await
        .expect("a lock after the restart");
    assert!(after.token() > token, "{} after {token}", after.token());
    let mut last = after.token();
    after.release().await.unwrap();

    // And across a crash, on a server that commits synchronously (the
    // kit's does not: its role is told to).
    let admin = server.client().await;
    admin
        .batch_execute("ALTER ROLE postgres SET synchronous_commit = on")
        .await
        .unwrap();
    let durable = Locker::builder()
        .wait(Duration::from_secs(20))
        .postgres(&server.postgres_url())
        .await
        .unwrap();
    for _ in 0..3 {
        let guard = durable.lock("order:9").await.unwrap();
        last = guard.token();
        guard.release().await.unwrap();
    }
    server.crash_and_restart();
    let recovered = durable
        .lock("order:9")
        .await
        .expect("a lock after the crash");
    assert!(
        recovered.token() > last,
        "{} after {last}",
        recovered.token()
    );
    recovered.release().await.unwrap();
}

/// A transaction checked in under a lease commits its writes while the
/// lease holds, even past its expiry: the row lock keeps the next owner
/// out until the commit. A holder whose lease was taken is refused at the
/// check, so its write never commits; no token column is involved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_in_transaction_commits_only_while_the_lease_holds() {
    checked_in(LockKind::Exclusive, Driver::TokioPostgres).await;
    // A lease of the other kinds (a row of `holders`) is checked in alike.
    checked_in(LockKind::Write, Driver::TokioPostgres).await;
}

/// The same through sqlx (feature `sqlx`): its transaction checks in as a
/// tokio-postgres one does, on the plain lock and on a write lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlx_transaction_checks_in_as_a_tokio_postgres_one() {
    checked_in(LockKind::Exclusive, Driver::Sqlx).await;
    checked_in(LockKind::Write, Driver::Sqlx).await;
}

/// The driver a service writes through.
#[derive(Clone, Copy, Debug)]
enum Driver {
    TokioPostgres,
    Sqlx,
}

/// A connection of either driver to `server`.
enum Connection {
    TokioPostgres(tokio_postgres::Client),
    Sqlx(sqlx::PgPool),
}

/// An open transaction of either driver.
enum Open<'c> {
    TokioPostgres(tokio_postgres::Transaction<'c>),
    Sqlx(sqlx::Transaction<'static, sqlx::Postgres>),
}

impl Connection {
    async fn to(server: &PostgresServer, driver: Driver) -> Connection {
        match driver {
            Driver::TokioPostgres => Connection::TokioPostgres(server.client().await),
            Driver::Sqlx => {
                let pool = sqlx::PgPool::connect(&server.postgres_url()).await;
                Connection::Sqlx(pool.expect("sqlx connects"))
            }
        }
    }

    async fn begin(&mut self) -> Open<'_> {
        match self {
            Connection::TokioPostgres(client) => {
                Open::TokioPostgres(client.transaction().await.unwrap())
            }
            Connection::Sqlx(pool) => Open::Sqlx(pool.begin().await.unwrap()),
        }
    }
}

impl Open<'_> {
    async fn check_in(&mut self, guard: &lock_core::LockGuard) -> Result<(), LockError> {
        match self {
            Open::TokioPostgres(transaction) => guard.check_in(&*transaction).await,
            Open::Sqlx(transaction) => guard.check_in(transaction).await,
        }
    }

    async fn execute(&mut self, statement: &str) {
        match self {
            Open::TokioPostgres(transaction) => {
                transaction.execute(statement, &[]).await.unwrap();
            }
            Open::Sqlx(transaction) => {
                sqlx::query(statement)
                    .execute(&mut **transaction)
                    .await
                    .unwrap();
            }
        }
    }

    async fn commit(self) {
        match self {
            Open::TokioPostgres(transaction) => transaction.commit().await.unwrap(),
            Open::Sqlx(transaction) => transaction.commit().await.unwrap(),
        }
    }
}

/// A request for the plain lock or a write lock, as `kind` says.
fn request_of(kind: LockKind, locker: &Locker, key: &str) -> lock_core::LockRequest {
    match kind {
        LockKind::Write => locker.write_lock(key),
        _ => locker.lock(key),
    }
}

/// A Locker on `url` built by `configure`, counting its tries.
async fn counted(
    url: &str,
    configure: impl FnOnce(lock_core::LockerBuilder) -> lock_core::LockerBuilder,
) -> (Locker, Counting) {
    let backend = PostgresBackend::connect(url, "lock", Duration::from_secs(2));
    let counting = Counting::new(std::sync::Arc::new(backend.await.unwrap()));
    let locker = configure(Locker::builder()).backend(counting.clone());
    (locker.unwrap(), counting)
}

/// One lease of `kind` (the plain lock or a write lock) checked in to a
/// transaction of `driver` that outlives it.
async fn checked_in(kind: LockKind, driver: Driver) {
    let server = PostgresServer::start();
    let url = server.postgres_url();
    let ttl = Duration::from_millis(300);
    let holder = Locker::builder()
        .ttl(ttl)
        .watchdog(false)
        .postgres(&url)
        .await
        .unwrap();
    let (other, asks) = counted(&url, |b| b.wait(Duration::from_secs(20))).await;
    let admin = server.client().await;
    admin
        .batch_execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (7, 0)")
        .await
        .unwrap();
    let mut db = Connection::to(&server, driver).await;

    let guard = request_of(kind, &holder, "account:7").await.unwrap();
    let mut transaction = db.begin().await;
    transaction
        .check_in(&guard)
        .await
        .expect("held: checked in");
    transaction
        .execute("UPDATE accounts SET balance = balance + 1 WHERE id = 7")
        .await;
    // The lease runs out while the transaction is open (unrenewed: the
    // expiry is the contract), and another owner asks for the key.
    tokio::time::sleep(guard.expires_in() + Duration::from_millis(100)).await;
    let before = asks.acquires();
    let mut taker = tokio::spawn(async move {
        let next = request_of(kind, &other, "account:7").await;
        next.map(|g| (g, Instant::now()))
    });
    // Refused again and again while the transaction keeps the row (no
    // release will notify it: it asks again within 100 ms).
    tokio::select! {
        () = asks.acquires_reach(before + 3) => {}
        got = &mut taker => panic!("the next owner got in beside an open checked-in transaction: {got:?}"),
    }
    let committing = Instant::now();
    transaction.commit().await;
    let (next, granted) = taker
        .await
        .unwrap()
        .expect("the next owner after the commit");
    assert!(granted >= committing);
    assert!(next.token() > guard.token());

    // The old holder, now without its lease, is refused at the check.
    let mut late = db.begin().await;
    let err = late.check_in(&guard).await.unwrap_err();
    assert!(matches!(err, LockError::Lost { .. }), "{err}");
    drop(late);
    assert!(!guard.is_held());
    let balance: i32 = admin
        .query_one("SELECT balance FROM accounts WHERE id = 7", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(balance, 1, "only the write checked in under a live lease");
    next.release().await.unwrap();
}

/// A waiter behind a holder whose checked-in transaction stays open past
/// the store's timeout waits it out, and is granted after the commit, woken
/// by the release. (A waiter that waited on the transaction's row lock was
/// ended by the statement's timeout: `Unavailable` after 2 s of a 10 s wait.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_outlasts_a_long_checked_in_transaction() {
    behind_a_long_transaction(LockKind::Exclusive).await;
    behind_a_long_transaction(LockKind::Write).await;
}

async fn behind_a_long_transaction(kind: LockKind) {
    let server = PostgresServer::start();
    let url = server.postgres_url();
    // The waiter's statements are bounded by 1 s: a wait on the row would
    // end then.
    let timeout = Duration::from_secs(1);
    let holder = Locker::builder().postgres(&url).await.unwrap();
    let waiter = Locker::builder().timeout(timeout).postgres(&url).await;
    let waiter = waiter.unwrap();
    let mut db = server.client().await;
    let guard = request_of(kind, &holder, "account:8").await.unwrap();
    let transaction = db.transaction().await.unwrap();
    guard.check_in(&transaction).await.expect("checked in");
    let taker = tokio::spawn(async move {
        let next = request_of(kind, &waiter, "account:8").wait(Duration::from_secs(10));
        next.await.map(|g| (g, Instant::now()))
    });
    // Open for 3 x the timeout: a wait on the row would have ended by then.
    tokio::time::sleep(timeout * 3).await;
    assert!(
        !taker.is_finished(),
        "{kind:?}: the waiter stopped beside an open checked-in transaction: {:?}",
        taker.await
    );
    let committing = Instant::now();
    transaction.commit().await.unwrap();
    guard.release().await.unwrap();
    let (next, granted) = taker.await.unwrap().expect("granted after the commit");
    assert!(granted >= committing);
    // Woken by the release, not at the end of the holder's 30 s lease.
    let after = granted - committing;
    assert!(
        after < Duration::from_secs(5),
        "{kind:?}: granted {after:?} after the commit"
    );
    next.release().await.unwrap();
}

/// How many statements calling the schema's `acquire` the server logged.
fn acquires_logged(server: &PostgresServer) -> usize {
    let log = std::fs::read_to_string(server.path().join("server.log")).unwrap_or_default();
    log.lines()
        .filter(|line| line.contains("statement:") || line.contains("execute"))
        .filter(|line| line.contains(".acquire("))
        .count()
}

/// Counted at the server (every statement logged): a waiter behind a long
/// lease sends nothing until the release is notified, then one try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sends_no_statement_while_the_lease_is_held() {
    let store = TestStore::postgres();
    let TestStore::Postgres(server) = &store else {
        unreachable!("a PostgreSQL store")
    };
    let admin = server.client().await;
    admin
        .batch_execute("ALTER ROLE postgres SET log_statement = 'all'")
        .await
        .unwrap();
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l).await;
    let guard = holder.lock("quiet").await.unwrap();
    let task =
        tokio::spawn(async move { waiter.lock("quiet").wait(Duration::from_secs(30)).await });
    // A try, then (once subscribed) one more so that no release is missed.
    counts.acquires_reach(2).await;
    let before = acquires_logged(server);
    assert!(before >= 3, "the log counts acquires ({before})");
    // The hold is the contract: 3 s of a 30 s lease, not one statement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        acquires_logged(server),
        before,
        "the waiter polled the server"
    );
    guard.release().await.unwrap();
    let next = task.await.unwrap().expect("woken by the release");
    assert_eq!(
        acquires_logged(server),
        before + 1,
        "one try after the release"
    );
    next.release().await.unwrap();
}

/// `pg_terminate_backend` of every connection of the Lockers: the holder
/// renews through new ones and keeps its lease, and a waiter still gets
/// the lock once it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_connections_are_made_again() {
    let server = PostgresServer::start();
    let url = server.postgres_url();
    let ttl = Duration::from_secs(1);
    let holder = Locker::builder().ttl(ttl).postgres(&url).await.unwrap();
    let waiter = Locker::builder()
        .wait(Duration::from_secs(20))
        .postgres(&url)
        .await
        .unwrap();
    let guard = holder.lock("order:3").await.unwrap();
    let admin = server.client().await;
    let terminate = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE pid <> pg_backend_pid() AND datname = 'postgres'";
    let killed: i64 = admin.query_one(terminate, &[]).await.unwrap().get(0);
    assert!(killed >= 2, "the Lockers' connections ({killed})");
    // Three lease lengths: only renewals through new connections keep it.
    tokio::time::sleep(3 * ttl).await;
    assert!(guard.is_held(), "the lease was lost with the connections");
    let token = guard.token();
    let next = tokio::spawn(async move { waiter.lock("order:3").await });
    guard
        .release()
        .await
        .expect("released through a new connection");
    let next = next.await.unwrap().expect("the waiter gets the lock");
    assert!(next.token() > token);
    next.release().await.unwrap();
}

/// Through a transaction-pooling PgBouncer with no `listen_url`, a waiter
/// asks again every `POLL_INTERVAL`: it gets a lock released 30 s before
/// its lease ends within that interval, and it does poll meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_pgbouncer_without_a_listen_url_waiters_poll() {
    let mut bouncer = PgBouncer::start();
    let url = bouncer.postgres_url();
    let holder = Locker::connect(&url).await.unwrap();
    let backend = PostgresBackend::connect(&url, "lock", Duration::from_secs(2))
        .await
        .unwrap();
    let counts = Counting::new(std::sync::Arc::new(backend));
    let waiter = Locker::builder().backend(counts.clone()).unwrap();
    let guard = holder.lock("order:11").await.unwrap();
    let task =
        tokio::spawn(async move { waiter.lock("order:11").wait(Duration::from_secs(30)).await });
    // Two asks, then at least two more a poll apart.
    counts.acquires_reach(4).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let next = task.await.unwrap().expect("the waiter gets the lock");
    let waited = released.elapsed();
    let bound = PostgresBackend::POLL_INTERVAL + Duration::from_millis(750);
    assert!(waited <= bound, "took {waited:?} after the release");
    next.release().await.unwrap();

    // A pooler passes no startup option: a role whose transactions read
    // repeatable read is refused, with what to set, not served wrongly.
    let admin = bouncer.postgres.client().await;
    admin
        .batch_execute("ALTER ROLE postgres SET default_transaction_isolation = 'repeatable read'")
        .await
        .unwrap();
    // New server sessions read the role's settings.
    bouncer.restart();
    let late = Locker::builder()
        .wait(Duration::from_secs(5))
        .postgres(&url)
        .await
        .unwrap();
    let err = late.lock("order:12").await.unwrap_err();
    assert!(error_chain(&err).contains("ALTER ROLE"), "{err}");
}

/// `sslmode=require` in the URL connects over TLS (feature `tls`),
/// checking the server's certificate: against the roots given, every
/// connection of the Locker is encrypted; against the system's, a private
/// authority's certificate is refused at connect, by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_connects_over_tls_and_checks_the_certificate() {
    let server = PostgresServer::start_tls();
    let url = server.postgres_tls_url();
    let locker = Locker::builder()
        .tls_root_certificates(server.ca_certificate())
        .postgres(&url)
        .await
        .expect("trusting the server's authority");
    locker
        .lock("order:13")
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let admin = server.client().await;
    let (encrypted, plain): (i64, i64) = {
        let row = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
                   FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                  WHERE a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(encrypted >= 2, "the pool and LISTEN over TLS ({encrypted})");
    assert_eq!(plain, 0, "a Locker connection without TLS");

    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::TlsRejected { .. }), "{err}");
}

/// A lease past its expiry that nobody took over is lost at the check-in:
/// its row still names its owner, so only the expiry refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_refused_at_the_check_in() {
    let server = PostgresServer::start();
    let holder = Locker::builder()
        .ttl(Duration::from_millis(300))
        .watchdog(false)
        .postgres(&server.postgres_url())
        .await
        .unwrap();
    let admin = server.client().await;
    let mut db = server.client().await;
    for (kind, table) in [
        (LockKind::Exclusive, "leases"),
        (LockKind::Write, "holders"),
    ] {
        let guard = request_of(kind, &holder, "account:9").await.unwrap();
        let name = holder.stored_keys("account:9").unwrap().of_kind(kind);
        expired_on_the_server(&admin, table, &name).await;
        let transaction = db.transaction().await.unwrap();
        let err = guard.check_in(&transaction).await.unwrap_err();
        assert!(matches!(err, LockError::Lost { .. }), "{kind:?}: {err}");
        drop(transaction);
        assert!(!guard.is_held(), "{kind:?}");
    }
}

/// Waits until the row of `name` in `table` (schema `lock`) is past its
/// expiry by the server's clock, and returns that expiry (as text, exact).
async fn expired_on_the_server(admin: &tokio_postgres::Client, table: &str, name: &str) -> String {
    let query = format!(
        "SELECT expires <= clock_timestamp(), expires::text FROM lock.{table} WHERE name = $1"
    );
    let expired = async {
        loop {
            let row = admin.query_one(query.as_str(), &[&name]).await;
            let row = row.expect("the row still stands");
            if row.get::<_, bool>(0) {
                return row.get::<_, String>(1);
            }
            // The expiry is the server's clock: looked at again shortly.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), expired)
        .await
        .expect("the lease never expired")
}

/// A renewal held back (in a proxy) until its row expired, then delivered:
/// it renews nothing (the guard is told), the row's expiry stays, and
/// another Locker gets the key at once. For a plain lease and a holder row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_lands_after_the_expiry_revives_nothing() {
    let server = PostgresServer::start();
    let proxy = lock_testkit::DelayProxy::start(server.port()).await;
    let through = format!("postgres://postgres@127.0.0.1:{}/postgres", proxy.port());
    let backend = PostgresBackend::connect(&through, "lock", Duration::from_secs(10));
    let backend = backend.await.unwrap();
    let direct = locker(&server).await.unwrap();
    let admin = server.client().await;
    for (kind, table) in [
        (LockKind::Exclusive, "leases"),
        (LockKind::Write, "holders"),
    ] {
        let keys = direct.stored_keys("late:renewal").unwrap();
        let name = keys.of_kind(kind);
        let ttl = Duration::from_millis(300);
        let taken = backend.acquire(&keys, kind, "late-owner", ttl).await;
        assert!(matches!(taken, Ok(Attempt::Acquired(_))), "{taken:?}");
        proxy.hold();
        let renewal = backend.renew(&keys, kind, "late-owner", Duration::from_secs(30));
        tokio::pin!(renewal);
        // Held as it names the lease, or as it prepares the statement on a
        // connection that has not yet (the renewal waits for that too).
        let held = async {
            tokio::select! {
                () = proxy.requests_hold(&name) => {}
                () = proxy.requests_hold("SET expires") => {}
            }
        };
        tokio::select! {
            answered = &mut renewal => panic!("answered while held: {answered:?}"),
            held = tokio::time::timeout(Duration::from_secs(10), held) => {
                held.expect("the renewal never reached the proxy");
            }
        }
        let expiry = expired_on_the_server(&admin, table, &name).await;
        proxy.release();
        let renewed = renewal.await.expect("answered once delivered");
        assert!(
            !renewed,
            "{kind:?}: a late renewal renewed an expired lease"
        );
        assert_eq!(
            expired_on_the_server(&admin, table, &name).await,
            expiry,
            "{kind:?}: the late renewal moved the expiry"
        );
        let next = direct
            .lock_of("late:renewal", kind)
            .wait(Duration::ZERO)
            .await;
        let next = next.unwrap_or_else(|err| panic!("{kind:?}: the key is not free: {err}"));
        next.release().await.unwrap();
    }
}
