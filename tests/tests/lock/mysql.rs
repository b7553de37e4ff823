//! The MySQL store's own promises, beyond the conformance suite (which
//! runs on it too, on MariaDB): what connecting checks and tells, the
//! printed schema run by hand and locked under exactly the rights it
//! grants, tokens that rise across a restart and a crash of the server,
//! keys kept apart byte for byte, waiters woken without polling,
//! connections killed under a holder, and transactions checked in to a
//! lease.

use std::sync::Arc;
use std::time::Duration;

use lock_core::backend::MysqlBackend;
use lock_core::{LockError, LockKind, Locker};
use lock_testkit::{Counting, MYSQL_DATABASE, MysqlServer, TestStore, error_chain};
use tokio::time::Instant;

async fn locker(server: &MysqlServer) -> Result<Locker, LockError> {
    Locker::connect(&server.mysql_url()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_makes_the_tables_once_and_tells_what_to_fix() {
    let server = MysqlServer::start();
    // Two Lockers connecting at once make the tables once, between them.
    let (a, b) = tokio::join!(locker(&server), locker(&server));
    let (a, b) = (a.expect("first Locker"), b.expect("second Locker"));
    let guard = a.lock("order:1").await.unwrap();
    assert!(b.try_lock("order:1").await.unwrap().is_none());
    guard.release().await.unwrap();
    // `mariadb://` is the same store.
    let url = server.mysql_url().replace("mysql://", "mariadb://");
    let mariadb = Locker::connect(&url).await.expect("a mariadb:// URL");
    assert!(mariadb.try_lock("order:1").await.unwrap().is_some());

    let url = format!("{}?create_schema=maybe", server.mysql_url());
    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(error_chain(&err).contains("create_schema=false"), "{err}");

    let url = format!("mysql://root@127.0.0.1:{}/nope", server.port());
    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    let told = error_chain(&err);
    assert!(
        told.contains("database the URL names does not exist"),
        "{told}"
    );

    let url = format!("mysql://root@127.0.0.1:{}", server.port());
    let err = Locker::connect(&url).await.unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    assert!(error_chain(&err).contains("names no database"), "{err}");

    let err = Locker::connect("mysql://root@127.0.0.1:notaport/x")
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidUrl { .. }), "{err}");
    let told = error_chain(&err);
    assert!(told.contains("mysql://[user[:password]@]host"), "{told}");

    let long = Locker::builder().namespace("n".repeat(MysqlBackend::MAX_NAMESPACE_LEN + 1));
    let err = long.mysql(&server.mysql_url()).await.unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
    let dotted = Locker::builder().namespace("orders.v2");
    let err = dotted.mysql(&server.mysql_url()).await.unwrap_err();
    assert!(
        error_chain(&err).contains("A-Za-z0-9-_"),
        "{}",
        error_chain(&err)
    );

    // Older procedures over the same tables are made again at connect.
    server
        .sql_as_root("DROP PROCEDURE lock_force_release_all")
        .unwrap();
    let upgraded = locker(&server)
        .await
        .expect("older procedures are replaced");
    let forced = upgraded.force_release("order:nothing").await.unwrap();
    assert_eq!(forced.removed, 0);
    // Tables of another format are refused, never reused.
    server
        .sql_as_root("UPDATE lock_format SET version = 3")
        .unwrap();
    let err = locker(&server).await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::UnknownFormat {
                stored: 3,
                ours: 1,
                ..
            }
        ),
        "{err}"
    );
    // Tables dropped under a connected Locker: told at once, not retried
    // until the wait runs out.
    server.sql_as_root("DROP TABLE lock_leases").unwrap();
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
    let server = MysqlServer::start();
    server
        .sql_as_root(&format!(
            "CREATE USER 'guarded'@'%' IDENTIFIED BY 's3cret'; \
             GRANT ALL ON {MYSQL_DATABASE}.* TO 'guarded'@'%'"
        ))
        .unwrap();
    let url = |auth: &str| {
        format!(
            "mysql://{auth}@127.0.0.1:{}/{MYSQL_DATABASE}",
            server.port()
        )
    };
    let err = Locker::connect(&url("guarded:wrong")).await.unwrap_err();
    assert!(
        matches!(err, LockError::AuthenticationFailed { .. }),
        "{err}"
    );
    let told = error_chain(&err);
    assert!(told.contains("fix them in the URL"), "{told}");
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

/// A DBA runs the printed DDL; a user with only the printed grants (and
/// `create_schema=false`) locks every kind, and one without them is told
/// what to grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_schema_and_grants_are_all_a_locking_user_needs() {
    let server = MysqlServer::start();
    let (ddl, grants) = MysqlBackend::schema_sql("lock", MYSQL_DATABASE, "locker").unwrap();
    server.sql_as_root(&ddl).expect("the printed DDL runs");
    server
        .sql_as_root("CREATE USER 'locker'@'%' IDENTIFIED BY 'pw'; CREATE USER 'nobody'@'%' IDENTIFIED BY 'pw'")
        .unwrap();
    let grants = grants.replace("TO 'locker'", "TO 'locker'@'%'");
    server.sql_as_root(&grants).expect("the printed grants run");
    let url = |user: &str| {
        format!(
            "mysql://{user}:pw@127.0.0.1:{}/{MYSQL_DATABASE}?create_schema=false",
            server.port()
        )
    };
    // A user without the grants, who is shown no tables: told so, with the
    // fix.
    let err = Locker::connect(&url("nobody")).await.unwrap_err();
    assert!(
        matches!(err, LockError::PermissionDenied { .. }),
        "{}",
        error_chain(&err)
    );
    assert!(
        error_chain(&err).contains("lockctl schema"),
        "{}",
        error_chain(&err)
    );
    let a = Locker::connect(&url("locker"))
        .await
        .expect("the granted user");
    let b = Locker::connect(&url("locker"))
        .await
        .expect("the granted user");
    for request in [
        a.lock("order:7"),
        a.fair_lock("order:7"),
        a.read_lock("order:7"),
        a.semaphore("order:7", 2),
        a.striped("order:7", 2),
    ] {
        let guard = request.await.expect("a lock of the granted user");
        guard.release().await.unwrap();
    }
    // Waiting, waking and force-releasing under the same rights.
    let held = a.lock("order:8").await.unwrap();
    let waiter = tokio::spawn(async move { b.lock("order:8").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.release().await.unwrap();
    let next = waiter.await.unwrap().expect("woken");
    let forced = a.force_release("order:8").await.unwrap();
    assert_eq!(
        (forced.removed, forced.tokens_up_to),
        (1, Some(next.token()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_rise_across_a_restart_and_a_crash_of_the_server() {
    let server = MysqlServer::start();
    let locker = Locker::builder()
        .wait(Duration::from_secs(20))
        .mysql(&server.mysql_url())
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
    for _ in 0..3 {
        let guard = locker.lock("order:9").await.unwrap();
        last = guard.token();
        guard.release().await.unwrap();
    }
    // The kit's server flushes its log at each commit
    // (innodb_flush_log_at_trx_commit=1): a kill loses no grant.
    server.crash_and_restart();
    let recovered = locker
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

/// Keys that differ only in case, a trailing space, an accent or their
/// last byte are different locks: names are compared byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_differ_in_a_byte_are_different_locks() {
    let server = MysqlServer::start();
    let locker = locker(&server).await.unwrap();
    let long = "k".repeat(lock_core::MAX_KEY_LEN);
    let mut last = long.clone();
    last.pop();
    last.push('j');
    let pairs = [
        ("order", "Order"),
        ("order", "order "),
        ("resume", "résumé"),
        ("resume", "resumé"),
        (long.as_str(), last.as_str()),
    ];
    for (one, other) in pairs {
        let guard = locker.lock(one).await.unwrap();
        let beside = locker.try_lock(other).await.unwrap();
        assert!(beside.is_some(), "`{other}` is held with `{one}`");
        let again = tokio::spawn({
            let locker = locker.clone();
            let one = one.to_owned();
            async move { locker.try_lock(one).await }
        });
        assert!(again.await.unwrap().unwrap().is_none(), "`{one}` twice");
        guard.release().await.unwrap();
    }
}

/// A waiter behind a 30 s lease sends no statement while it waits (its
/// Locker's wake-up connection sleeps), and is granted within a second of
/// the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sends_nothing_until_the_release_and_is_granted_within_a_second() {
    let store = TestStore::mysql();
    let holder = store.locker().await;
    let (waiter, counts) = store.locker_with(|l| l.ttl(Duration::from_secs(30))).await;
    let guard = holder.lock("quiet").await.unwrap();
    let task =
        tokio::spawn(async move { waiter.lock("quiet").wait(Duration::from_secs(40)).await });
    // A try, then (once subscribed) one more so that no release is missed.
    counts.acquires_reach(2).await;
    let before = counts.acquires();
    // The hold is the contract: 3 s of a 30 s lease, not one statement.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(counts.acquires(), before, "the waiter polled the server");
    let released = Instant::now();
    guard.release().await.unwrap();
    let next = task.await.unwrap().expect("woken by the release");
    let handoff = released.elapsed();
    assert!(
        handoff < Duration::from_secs(1),
        "granted {handoff:?} after the release"
    );
    assert_eq!(counts.acquires(), before + 1, "one try after the release");
    next.release().await.unwrap();
}

/// Every connection of the Lockers killed (`KILL`): the holder renews
/// through new ones and keeps its lease, and a waiter still gets the lock
/// once it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connections_are_made_again() {
    let server = MysqlServer::start();
    let url = server.mysql_url();
    let ttl = Duration::from_secs(1);
    let holder = Locker::builder().ttl(ttl).mysql(&url).await.unwrap();
    let waiter = Locker::builder()
        .wait(Duration::from_secs(20))
        .mysql(&url)
        .await
        .unwrap();
    let guard = holder.lock("order:3").await.unwrap();
    let ids = server
        .sql_as_root(&format!(
            "SELECT id FROM information_schema.PROCESSLIST \
             WHERE db = '{MYSQL_DATABASE}' AND id <> CONNECTION_ID()"
        ))
        .unwrap();
    let ids: Vec<&str> = ids.lines().collect();
    assert!(ids.len() >= 2, "the Lockers' connections ({ids:?})");
    let kills: Vec<String> = ids.iter().map(|id| format!("KILL {id};")).collect();
    let _ = server.sql_as_root(&kills.concat());
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

/// A request for the plain lock or a write lock, as `kind` says.
fn request_of(kind: LockKind, locker: &Locker, key: &str) -> lock_core::LockRequest {
    match kind {
        LockKind::Write => locker.write_lock(key),
        _ => locker.lock(key),
    }
}

/// A transaction checked in (`LOCK IN SHARE MODE` on the lease row)
/// commits only while the lease holds: the lease runs out while it is
/// open, and the next owner is kept out until the commit, then granted
/// with a higher token; the old holder's next check-in is refused as lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_in_transaction_keeps_the_next_owner_out_until_it_ends() {
    let server = MysqlServer::start();
    let url = server.mysql_url();
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL)")
        .execute(&pool)
        .await
        .unwrap();
    for (id, kind) in [(7, LockKind::Exclusive), (8, LockKind::Write)] {
        checked_in(&url, &pool, id, kind).await;
    }
}

async fn checked_in(url: &str, pool: &sqlx::MySqlPool, id: i32, kind: LockKind) {
    let key = format!("account:{id}");
    sqlx::query("INSERT INTO accounts VALUES (?, 0)")
        .bind(id)
        .execute(pool)
        .await
        .unwrap();
    let ttl = Duration::from_millis(300);
    let holder = Locker::builder().ttl(ttl).watchdog(false).mysql(url).await;
    let holder = holder.unwrap();
    let backend = MysqlBackend::connect(url, "lock", Duration::from_secs(2)).await;
    let asks = Counting::new(Arc::new(backend.unwrap()));
    let other = Locker::builder()
        .wait(Duration::from_secs(20))
        .backend(asks.clone())
        .unwrap();

    let guard = request_of(kind, &holder, &key).await.unwrap();
    let mut transaction = pool.begin().await.unwrap();
    guard
        .check_in(&mut transaction)
        .await
        .expect("held: checked in");
    sqlx::query("UPDATE accounts SET balance = balance + 1 WHERE id = ?")
        .bind(id)
        .execute(&mut *transaction)
        .await
        .unwrap();
    // The lease runs out while the transaction is open (unrenewed: the
    // expiry is the contract), and another owner asks for the key.
    tokio::time::sleep(guard.expires_in() + Duration::from_millis(100)).await;
    let before = asks.acquires();
    let mut taker = {
        let key = key.clone();
        tokio::spawn(async move {
            let next = request_of(kind, &other, &key).await;
            next.map(|g| (g, Instant::now()))
        })
    };
    // Each request waits on the row for a second and asks again.
    tokio::select! {
        () = asks.acquires_reach(before + 3) => {}
        got = &mut taker => panic!("{kind:?}: the next owner got in beside an open checked-in transaction: {got:?}"),
    }
    let committing = Instant::now();
    transaction.commit().await.unwrap();
    let (next, granted) = taker
        .await
        .unwrap()
        .expect("the next owner after the commit");
    assert!(granted >= committing);
    assert!(next.token() > guard.token());
    // Granted as the row was let go, not after another lock wait.
    let after = granted - committing;
    assert!(
        after < Duration::from_secs(5),
        "{kind:?}: granted {after:?} after the commit"
    );

    // The old holder, now without its lease, is refused at the check.
    let mut late = pool.begin().await.unwrap();
    let err = guard.check_in(&mut late).await.unwrap_err();
    assert!(matches!(err, LockError::Lost { .. }), "{err}");
    late.rollback().await.unwrap();
    assert!(!guard.is_held());
    let (balance,): (i32,) = sqlx::query_as("SELECT balance FROM accounts WHERE id = ?")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(balance, 1, "only the write checked in under a live lease");
    next.release().await.unwrap();
}

/// A waiter behind a holder whose checked-in transaction stays open for
/// several lock waits and past the store's timeout waits it out, and is
/// granted after the commit, woken by the release (a request that waited
/// on the row through the client's timeout would end the wait as
/// `Unavailable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_outlasts_a_long_checked_in_transaction() {
    let server = MysqlServer::start();
    let url = server.mysql_url();
    let timeout = Duration::from_secs(2);
    let holder = Locker::builder().mysql(&url).await.unwrap();
    let waiter = Locker::builder().timeout(timeout).mysql(&url).await;
    let waiter = waiter.unwrap();
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let guard = holder.lock("account:9").await.unwrap();
    let mut transaction = pool.begin().await.unwrap();
    guard.check_in(&mut transaction).await.expect("checked in");
    let taker = tokio::spawn(async move {
        let next = waiter.lock("account:9").wait(Duration::from_secs(20));
        next.await.map(|g| (g, Instant::now()))
    });
    // Open for 3 x the timeout: a wait through it would have ended by then.
    tokio::time::sleep(timeout * 3).await;
    assert!(
        !taker.is_finished(),
        "the waiter stopped beside an open checked-in transaction: {:?}",
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
        "granted {after:?} after the commit"
    );
    next.release().await.unwrap();
}
