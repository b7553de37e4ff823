//! The wake-up connections of a Locker. MySQL has no `NOTIFY`, so a
//! waiter's lock is registered in the namespace's `_sleepers` table under
//! the id of the Locker's sleeping connection, which waits for a named lock
//! that the Locker's other connection holds (`SELECT GET_LOCK(..)`); a
//! release that someone waited for counts a wake-up on the lock's rows and
//! ends each registered connection's wait with `KILL QUERY`, which holds
//! no data and ends nothing but that wait. The connection then reads which
//! of its locks were woken, wakes their waiters here, and waits again. A
//! wake-up that comes while it is not waiting is found by the next wait,
//! which does not start while one is unread.
//!
//! Not `SELECT SLEEP(..)`: MariaDB's sleeps share one mutex, and
//! concurrent KILLs of sleeping connections stall on it for up to 2 s
//! each, long enough to lose wake-ups to the timeout; a named lock's wait
//! is the connection's own. A waker rings a connection's bell before it
//! interrupts it, and only when no ring is unheard, so that one KILL QUERY
//! at a time reaches a connection.
//!
//! The connections are made again after one breaks (from 100 ms up to 2 s
//! apart), with the locks registered again. While they are down a waiter
//! cannot subscribe and falls back on the holder's remaining time; waiters
//! subscribed when they broke are told (their signal ends) and do the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPool};
use sqlx::{ConnectOptions, Connection, Row};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::errors::{INTERRUPTED, bounded, number_of};
use super::schema::ListenSql;
use crate::backend::{Backoff, ReleaseSignal};
use crate::error::StoreError;

/// How long one wait lasts at most: the connection looks at its rows (and
/// forgets those nobody waits for) at least this often.
const WAIT_SECONDS: u32 = 30;

/// A route's key: the SHA-256 of its text, as `_wake` computes it.
type RouteKey = [u8; 32];

fn key_of(route: &str) -> RouteKey {
    Sha256::digest(route.as_bytes()).into()
}

/// The wake-up task and the waiters it wakes.
pub(super) struct Listener {
    shared: Arc<Shared>,
    statements: Arc<ListenSql>,
    task: JoinHandle<()>,
}

/// What the task and the subscribers share.
struct Shared {
    /// Whether the connection is up with every route registered.
    up: AtomicBool,
    /// The connection's id (valid while `up`).
    id: AtomicU64,
    /// Told each time the connection comes up.
    listening: tokio::sync::Notify,
    /// The waiters of each route: one signal per route, shared by its
    /// subscribers and gone with the last of them.
    routes: Mutex<HashMap<RouteKey, Route>>,
    /// Whether a route lost its last subscriber since the task last
    /// forgot stale rows.
    dropped: AtomicBool,
}

struct Route {
    text: String,
    releases: watch::Sender<u64>,
    subscribers: usize,
}

/// Drops a subscriber from its route (and the route with its last one).
struct Registration {
    shared: Arc<Shared>,
    key: RouteKey,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut routes = self.shared.routes();
        if let Some(route) = routes.get_mut(&self.key) {
            route.subscribers -= 1;
            if route.subscribers == 0 {
                routes.remove(&self.key);
                self.shared.dropped.store(true, Ordering::Release);
            }
        }
    }
}

impl Shared {
    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<RouteKey, Route>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the route `key`; `false` if nobody here waits on it.
    fn released(&self, key: &[u8]) -> bool {
        let routes = self.routes();
        let route = RouteKey::try_from(key)
            .ok()
            .and_then(|key| routes.get(&key));
        if let Some(route) = route {
            route.releases.send_modify(|n| *n = n.wrapping_add(1));
        }
        route.is_some()
    }

    /// The connection is down: every signal ends, and new ones start with
    /// the next connection.
    fn down(&self) {
        let mut routes = self.routes();
        self.up.store(false, Ordering::Release);
        for route in routes.values_mut() {
            route.releases = watch::Sender::new(0);
        }
    }
}

impl Listener {
    /// Starts the wake-up connection to the server `options` names, with
    /// the namespace's `statements`.
    pub(super) fn start(
        options: MySqlConnectOptions,
        statements: ListenSql,
        timeout: Duration,
    ) -> Self {
        let shared = Arc::new(Shared {
            up: AtomicBool::new(false),
            id: AtomicU64::new(0),
            listening: tokio::sync::Notify::new(),
            routes: Mutex::new(HashMap::new()),
            dropped: AtomicBool::new(false),
        });
        let statements = Arc::new(statements);
        let task = tokio::spawn(listen(
            options,
            Arc::clone(&statements),
            timeout,
            Arc::clone(&shared),
        ));
        Listener {
            shared,
            statements,
            task,
        }
    }

    /// Waits until the connection is up, for at most `timeout`: a Locker
    /// starts with its waiters woken by releases.
    pub(super) async fn started(&self, timeout: Duration) -> Result<(), StoreError> {
        let listening = self.shared.listening.notified();
        let mut listening = std::pin::pin!(listening);
        listening.as_mut().enable();
        if self.shared.up.load(Ordering::Acquire) {
            return Ok(());
        }
        tokio::time::timeout(timeout, listening)
            .await
            .map_err(|_| StoreError::not_applied("the wake-up connection did not start in time"))
    }

    /// A signal of the wake-ups of `route` (a stored name, or a name, a
    /// space and an owner value), active when it returns: the route is
    /// registered under the connection's id over `pool` if it is new here.
    pub(super) async fn subscribe(
        &self,
        route: &str,
        pool: &MySqlPool,
        timeout: Duration,
    ) -> Result<ReleaseSignal, StoreError> {
        let (signal, id, new) = self.signal(route)?;
        if new {
            let register = sqlx::query(&self.statements.subscribe)
                .bind(id)
                .bind(route)
                .execute(pool);
            bounded(timeout, true, register).await?;
        }
        Ok(signal)
    }
}

impl Listener {
    /// A signal of `route`, the connection's id, and whether the route is
    /// new here (so not registered yet).
    fn signal(&self, route: &str) -> Result<(ReleaseSignal, u64, bool), StoreError> {
        let key = key_of(route);
        // Read under the routes' lock, which `down` takes too: a signal
        // made here is ended by the next `down`.
        let mut routes = self.shared.routes();
        if !self.shared.up.load(Ordering::Acquire) {
            return Err(StoreError::not_applied("the wake-up connection is down"));
        }
        let id = self.shared.id.load(Ordering::Acquire);
        let new = !routes.contains_key(&key);
        let entry = routes.entry(key).or_insert_with(|| Route {
            text: route.to_owned(),
            releases: watch::Sender::new(0),
            subscribers: 0,
        });
        entry.subscribers += 1;
        let releases = entry.releases.subscribe();
        let registration = Registration {
            shared: Arc::clone(&self.shared),
            key,
        };
        Ok((ReleaseSignal::new(releases, registration), id, new))
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Keeps the wake-up connections, making them again when one breaks.
async fn listen(
    options: MySqlConnectOptions,
    statements: Arc<ListenSql>,
    timeout: Duration,
    shared: Arc<Shared>,
) {
    // Reconnects of many processes after one outage spread out (jitter).
    const PAUSES: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut pauses = PAUSES;
    let mut earlier: Option<u64> = None;
    loop {
        let connected = tokio::time::timeout(timeout, async {
            tokio::try_join!(options.connect(), options.connect())
        });
        if let Ok(Ok((mut connection, mut bell_holder))) = connected.await {
            let started = tokio::time::timeout(timeout, async {
                let id = register(&mut connection, &statements, &shared, earlier).await?;
                let bell = bell_lock(id);
                let held: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
                    .bind(&bell)
                    .fetch_one(&mut bell_holder)
                    .await?;
                Ok::<_, sqlx::Error>((id, bell, held == Some(1)))
            })
            .await;
            if let Ok(Ok((id, bell, true))) = started {
                earlier = Some(id);
                pauses = PAUSES;
                shared.id.store(id, Ordering::Release);
                shared.up.store(true, Ordering::Release);
                shared.listening.notify_waiters();
                let _ = wake_up(&mut connection, &statements, &shared, &bell).await;
            }
            shared.down();
            for connection in [connection, bell_holder] {
                let _ = tokio::time::timeout(timeout, connection.close()).await;
            }
        }
        tokio::time::sleep(pauses.pause()).await;
    }
}

/// The named lock the connection `id` waits for, held by its Locker's
/// other wake-up connection (unique on the server, as the id is).
fn bell_lock(id: u64) -> String {
    format!("lock-core wake-up {id}")
}

/// Registers every route waited on here under the new connection's id
/// (and removes the rows of the `earlier` one); returns the id.
async fn register(
    connection: &mut MySqlConnection,
    statements: &ListenSql,
    shared: &Shared,
    earlier: Option<u64>,
) -> Result<u64, sqlx::Error> {
    super::connect::session(connection).await?;
    let id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut *connection)
        .await?;
    if let Some(earlier) = earlier {
        for gone in [&statements.gone, &statements.gone_bell] {
            sqlx::query(gone)
                .bind(earlier)
                .execute(&mut *connection)
                .await?;
        }
    }
    sqlx::query(&statements.bell)
        .execute(&mut *connection)
        .await?;
    let texts: Vec<String> = shared.routes().values().map(|r| r.text.clone()).collect();
    for text in texts {
        sqlx::query(&statements.subscribe)
            .bind(id)
            .bind(text)
            .execute(&mut *connection)
            .await?;
    }
    Ok(id)
}

/// Waits, and wakes the waiters of each route woken, until the connection
/// breaks or the `bell` lock is let go (its holder broke).
async fn wake_up(
    connection: &mut MySqlConnection,
    statements: &ListenSql,
    shared: &Shared,
    bell: &str,
) -> Result<(), sqlx::Error> {
    let id = shared.id.load(Ordering::Acquire);
    loop {
        // Rings up to now are heard: a later one finds this connection
        // waiting, or keeps it from waiting.
        let answered = sqlx::query(&statements.answer)
            .execute(&mut *connection)
            .await;
        interrupted_is_none(answered)?;
        let heard = sqlx::query(&statements.heard)
            .fetch_all(&mut *connection)
            .await;
        for row in interrupted_is_none(heard)?.unwrap_or_default() {
            let (key, woken): (Vec<u8>, u64) = (row.try_get(0)?, row.try_get(1)?);
            // Acted on before the waiters ask again: a wake-up after this
            // one counts again.
            let seen = sqlx::query(&statements.seen)
                .bind(woken)
                .bind(id)
                .bind(&key)
                .execute(&mut *connection)
                .await;
            interrupted_is_none(seen)?;
            if !shared.released(&key) {
                shared.dropped.store(true, Ordering::Release);
            }
        }
        if shared.dropped.swap(false, Ordering::AcqRel) {
            forget(connection, statements, shared, id).await?;
        }
        let wait = sqlx::query_scalar::<_, Option<i64>>(&statements.wait)
            .bind(bell)
            .bind(WAIT_SECONDS)
            .fetch_optional(&mut *connection)
            .await;
        if let Some(Some(Some(1))) = interrupted_is_none(wait)? {
            // Granted: the other connection, which held it, is gone.
            return Err(sqlx::Error::Protocol(
                "the wake-up lock's holder is gone".into(),
            ));
        }
    }
}

/// Removes the rows of routes nobody here waits on any more, unless one
/// subscribed again since the row was read.
async fn forget(
    connection: &mut MySqlConnection,
    statements: &ListenSql,
    shared: &Shared,
    id: u64,
) -> Result<(), sqlx::Error> {
    let rows = sqlx::query(&statements.routes)
        .fetch_all(&mut *connection)
        .await;
    for row in interrupted_is_none(rows)?.unwrap_or_default() {
        let (key, generation): (Vec<u8>, u64) = (row.try_get(0)?, row.try_get(1)?);
        let waited =
            RouteKey::try_from(key.as_slice()).is_ok_and(|key| shared.routes().contains_key(&key));
        if !waited {
            let forgotten = sqlx::query(&statements.forget)
                .bind(id)
                .bind(&key)
                .bind(generation)
                .execute(&mut *connection)
                .await;
            interrupted_is_none(forgotten)?;
        }
    }
    Ok(())
}

/// A statement's answer, or `None` where a wake-up's `KILL QUERY` ended
/// it (the loop looks again).
fn interrupted_is_none<T>(answer: Result<T, sqlx::Error>) -> Result<Option<T>, sqlx::Error> {
    match answer {
        Ok(answer) => Ok(Some(answer)),
        Err(err) if number_of(&err) == Some(INTERRUPTED) => Ok(None),
        Err(err) => Err(err),
    }
}
