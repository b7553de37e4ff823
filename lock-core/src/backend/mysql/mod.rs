//! The MySQL backend: leases as rows of tables named after the namespace,
//! taken and ended by owner-checked procedures, with expiries on the server
//! clock, tokens from a counter row, and waiters woken by a wake-up
//! connection's interrupted sleep (MySQL has no `NOTIFY`).
//!
//! Rows rather than `GET_LOCK`: a named lock belongs to a session, so it
//! has no ttl, no watchdog and no token, and ends with a dropped
//! connection; a row is a lease like every other store's.

mod connect;
mod errors;
mod listen;
mod schema;

use std::time::Duration;

use sqlx::mysql::{MySqlArguments, MySqlPool, MySqlRow};
use sqlx::query::Query;
use sqlx::{Executor, MySql, Row};

use self::errors::{DEADLOCK, LOCK_WAIT_TIMEOUT, bounded, number_of, store_error};
use self::listen::Listener;
use self::schema::Schema;
use super::lock_tables::{
    Inspected, Taken, from_millis, inspection, millis, mode_of, name_of, other_kinds, token_of,
};
use super::{Attempt, Grant, LockStore, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::kind::LockKind;

/// Leases in MySQL (8.0 and later) or MariaDB (10.6 and later): one row
/// per held lock in the table `<namespace>_leases` of the URL's database,
/// over a small pool of connections (sqlx), and one more connection that
/// sleeps until a release wakes it.
///
/// Each operation is one statement: acquire and release call the
/// procedures the namespace holds (`_acquire` takes a free or expired
/// row, its own again, or answers how long the holder has left; `_release`
/// deletes the owner's row and wakes waiters), renewal is an owner-checked
/// `UPDATE`. A waiter sends nothing until a release wakes it or the
/// holder's lease runs out.
///
/// The other kinds (fair, read-write, semaphore, striped) keep one row
/// per holder or queue entry in the table `<namespace>_holders`, taken and
/// ended by the procedures `_take` and `_give`, each deciding under the row
/// lock of its lock's name, as a Redis script decides alone.
///
/// Tokens come from the namespace's counter row, drawn once the row is the
/// grantee's and locked to the commit, so they rise in grant order per key
/// and across kinds, also across a restart, and across a crash of a server
/// that flushes its log at each commit (`innodb_flush_log_at_trx_commit=1`,
/// the default; not across a failover to an asynchronous replica).
/// Keeps every kind of lock.
///
/// Waiters are woken by the Locker's wake-up connection: it waits for a
/// named lock its Locker holds (`SELECT GET_LOCK(..)`), registered in
/// `<namespace>_sleepers` for each lock a waiter of this Locker waits on,
/// and a release ends the wait with `KILL QUERY`. MySQL lets a user kill
/// only its own connections: a waiter of another user than the releaser's
/// finds the release within the holder's remaining time.
pub struct MysqlBackend {
    connections: Connections,
    schema: Schema,
    listener: Listener,
    description: String,
    statements: Statements,
    /// Ends the sweep with the backend.
    _sweep: super::sweep::Sweep,
}

impl std::fmt::Debug for MysqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlBackend")
            .field("store", &crate::backend::LockStore::describe(self))
            .finish_non_exhaustive()
    }
}

/// The pool, and how statements go over it.
#[derive(Clone)]
struct Connections {
    pool: MySqlPool,
    timeout: Duration,
}

impl Connections {
    /// Runs `query` on a pooled connection (prepared once per connection),
    /// within the timeout; `writes` as in [`bounded`].
    async fn rows<'q>(
        &self,
        query: impl Fn() -> Query<'q, MySql, MySqlArguments>,
        writes: bool,
    ) -> Result<Vec<MySqlRow>, StoreError> {
        bounded(self.timeout, writes, self.sent(query)).await
    }

    /// Runs a request for a lock (`_acquire`, `_take`) as [`rows`](Self::rows)
    /// does; `None` where the lock's row stayed locked for the whole lock
    /// wait, as a checked-in transaction keeps it
    /// ([`LockGuard::check_in`](crate::LockGuard::check_in)): the lock is
    /// held, and the request, rolled back, is asked again.
    async fn decided<'q>(
        &self,
        query: impl Fn() -> Query<'q, MySql, MySqlArguments>,
    ) -> Result<Option<Vec<MySqlRow>>, StoreError> {
        let sent = async {
            match self.sent(query).await {
                Err(err) if number_of(&err) == Some(LOCK_WAIT_TIMEOUT) => Ok(None),
                answer => answer.map(Some),
            }
        };
        bounded(self.timeout, true, sent).await
    }

    /// Sends `query`. A deadlock's victim was rolled back whole, so it is
    /// sent again at once (twice at most).
    async fn sent<'q>(
        &self,
        query: impl Fn() -> Query<'q, MySql, MySqlArguments>,
    ) -> Result<Vec<MySqlRow>, sqlx::Error> {
        let mut tries = 0;
        loop {
            tries += 1;
            match query().fetch_all(&self.pool).await {
                Err(err) if tries < 3 && number_of(&err) == Some(DEADLOCK) => continue,
                answer => return answer,
            }
        }
    }

    /// Interrupts the wait of the wake-up connections whose ids (numbers
    /// joined by commas) are in column `index` of `row`, each with `KILL
    /// QUERY`, all at once. Awaited before the release is answered: a
    /// process that exits right after its release still wakes the waiters
    /// of other processes (a task left running would die with it).
    async fn wake(&self, row: &MySqlRow, index: usize) {
        // NULL when nobody waits on the lock.
        let ids = text(row, index).unwrap_or_default();
        let kills = ids
            .split(',')
            .filter_map(|id| id.parse::<u64>().ok())
            .map(|id| {
                // The id is a number the server gave; KILL takes no parameter.
                // A wait that ended meanwhile is no error.
                let kill = format!("KILL QUERY {id}");
                async move {
                    let killed = self.pool.execute(kill.as_str());
                    let _ = tokio::time::timeout(self.timeout, killed).await;
                }
            });
        futures_util::future::join_all(kills).await;
    }

    /// Runs `query`, and returns how many rows it matched.
    async fn matched(&self, query: Query<'_, MySql, MySqlArguments>) -> Result<u64, StoreError> {
        let done = bounded(self.timeout, true, query.execute(&self.pool)).await?;
        Ok(done.rows_affected())
    }
}

/// The answer to a request that found the lock's row locked through the
/// lock wait: held, with its end unknown here; ask again at once (the next
/// request waits on the row again, granted as the row is let go).
const ROW_LOCKED: Attempt = Attempt::Held {
    remaining: Some(Duration::ZERO),
};

/// Each statement, made once per backend.
struct Statements {
    acquire: String,
    renew: String,
    release: String,
    announce: String,
    take: String,
    renew_holder: String,
    give: String,
    inspect: String,
    held: String,
    force_release: String,
}

impl Statements {
    fn of(schema: &Schema) -> Self {
        Statements {
            acquire: schema.acquire(),
            renew: schema.renew(),
            release: schema.release(),
            announce: schema.announce(),
            take: schema.take(),
            renew_holder: schema.renew_holder(),
            give: schema.give(),
            inspect: schema.inspect(),
            held: schema.held(),
            force_release: schema.force_release(),
        }
    }
}

/// Column `index` of `row` as a number (every procedure answers `SIGNED`).
/// A row that does not read came after the statement ran, so what it did is
/// unknown (a grant is undone by owner value).
fn number(row: &MySqlRow, index: usize) -> Result<Option<i64>, StoreError> {
    row.try_get(index).map_err(|err| store_error(err, true))
}

/// Column `index` of `row` as text (names and owner values are stored as
/// bytes, modes as characters).
fn text(row: &MySqlRow, index: usize) -> Result<String, StoreError> {
    if let Ok(text) = row.try_get::<String, _>(index) {
        return Ok(text);
    }
    let bytes: Vec<u8> = row.try_get(index).map_err(|err| store_error(err, false))?;
    String::from_utf8(bytes).map_err(StoreError::not_applied)
}

/// The first row of an answer that must have one.
fn first<'r>(rows: &'r [MySqlRow], what: &str) -> Result<&'r MySqlRow, StoreError> {
    rows.first()
        .ok_or_else(|| StoreError::in_doubt(format!("{what} answered no row")))
}

impl MysqlBackend {
    /// The longest namespace a MySQL store takes: the namespace starts
    /// every table's and procedure's name, and MySQL keeps 64 characters.
    ///
    /// ```
    /// use lock_core::backend::MysqlBackend;
    ///
    /// // `<namespace>_force_release_all` is the longest name.
    /// assert_eq!(MysqlBackend::MAX_NAMESPACE_LEN, 46);
    /// ```
    pub const MAX_NAMESPACE_LEN: usize = schema::MAX_NAMESPACE_LEN;

    /// The namespace, which names the tables.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::StoreError> {
    /// use lock_core::backend::MysqlBackend;
    /// use std::time::Duration;
    ///
    /// let url = "mysql://app:secret@db.internal/app";
    /// let backend = MysqlBackend::connect(url, "orders", Duration::from_secs(2)).await?;
    /// assert_eq!(backend.namespace(), "orders"); // tables `orders_leases`, ...
    /// # Ok(())
    /// # }
    /// ```
    pub fn namespace(&self) -> &str {
        &self.schema.name
    }
}

impl LockStore for MysqlBackend {
    fn supports(&self, _: LockKind) -> bool {
        true
    }

    fn acquire<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<Attempt, StoreError>> {
        StoreFuture::new(async move {
            let Some((mode, size)) = mode_of(kind, "MySQL")? else {
                return self.acquire_lease(keys, owner, ttl).await;
            };
            let query = || {
                sqlx::query(&self.statements.take)
                    .bind(keys.of_kind(kind))
                    .bind(owner)
                    .bind(mode)
                    .bind(size)
                    .bind(millis(ttl))
            };
            let Some(rows) = self.connections.decided(query).await? else {
                return Ok(ROW_LOCKED);
            };
            let row = first(&rows, "take")?;
            let taken = Taken {
                token: number(row, 0)?,
                place: number(row, 1)?,
                wait: number(row, 2)?,
                queued: number(row, 3)? == Some(1),
                stored: number(row, 4)?,
            };
            taken.attempt(kind, mode, ttl)
        })
    }

    fn renew<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let sql = match kind {
                LockKind::Exclusive => &self.statements.renew,
                _ => &self.statements.renew_holder,
            };
            let name = name_of(keys, kind);
            let query = sqlx::query(sql).bind(millis(ttl)).bind(&*name).bind(owner);
            Ok(self.connections.matched(query).await? == 1)
        })
    }

    fn release<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        owner: &'a str,
    ) -> StoreFuture<'a, Result<bool, StoreError>> {
        StoreFuture::new(async move {
            let sql = match kind {
                LockKind::Exclusive => &self.statements.release,
                _ => &self.statements.give,
            };
            let name = name_of(keys, kind);
            let query = || sqlx::query(sql).bind(&*name).bind(owner);
            let rows = self.connections.rows(query, true).await?;
            let row = first(&rows, "release")?;
            self.connections.wake(row, 1).await;
            Ok(number(row, 0)? == Some(1))
        })
    }

    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        StoreFuture::new(async move {
            let name = name_of(keys, kind);
            let query = || sqlx::query(&self.statements.announce).bind(&*name);
            let rows = self.connections.rows(query, true).await?;
            self.connections.wake(first(&rows, "announce")?, 0).await;
            Ok(())
        })
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(async move {
            // A queue entry is woken on its own route (`<name> <owner>`), as
            // the procedures wake it.
            let name = name_of(keys, kind);
            let route = match queued_owner {
                Some(owner) => format!("{name} {owner}"),
                None => name.into_owned(),
            };
            let Connections { pool, timeout } = &self.connections;
            self.listener.subscribe(&route, pool, *timeout).await
        })
    }

    fn inspect<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<Inspection, StoreError>> {
        StoreFuture::new(self.inspection_of(keys))
    }

    fn held_keys<'a>(
        &'a self,
        namespace: &'a str,
        pattern: &'a Pattern,
    ) -> StoreFuture<'a, Result<Vec<String>, StoreError>> {
        StoreFuture::new(self.held_keys_matching(namespace, pattern))
    }

    fn force_release<'a>(
        &'a self,
        keys: &'a StoredKeys,
    ) -> StoreFuture<'a, Result<ForceReleased, StoreError>> {
        StoreFuture::new(self.force_release_all(keys))
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

impl MysqlBackend {
    /// Takes the plain lock's lease (the table `_leases`).
    async fn acquire_lease(
        &self,
        keys: &StoredKeys,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let query = || {
            sqlx::query(&self.statements.acquire)
                .bind(keys.lease())
                .bind(owner)
                .bind(millis(ttl))
        };
        let Some(rows) = self.connections.decided(query).await? else {
            return Ok(ROW_LOCKED);
        };
        let row = first(&rows, "acquire")?;
        Ok(match number(row, 0)? {
            Some(token) => Attempt::Acquired(Grant::new(token_of(token), ttl)),
            None => Attempt::Held {
                remaining: number(row, 1)?.map(from_millis),
            },
        })
    }

    pub(super) async fn inspection_of(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let [fair, rw, permits, segments] = other_kinds(keys);
        let query = || {
            sqlx::query(&self.statements.inspect)
                .bind(keys.lease())
                .bind(&fair)
                .bind(&rw)
                .bind(&permits)
                .bind(&segments)
        };
        let rows = self.connections.rows(query, false).await?;
        let rows = rows.iter().map(|row| {
            Ok(Inspected {
                mode: text(row, 0)?,
                owner: text(row, 1)?,
                token: number(row, 2)?.unwrap_or(0),
                remaining_ms: number(row, 3)?.unwrap_or(0),
                age_ms: number(row, 4)?.unwrap_or(0),
                segment: number(row, 5)?.unwrap_or(0),
                size: number(row, 6)?.unwrap_or(0),
                seq: number(row, 7)?.unwrap_or(0),
                waited: number(row, 8)? == Some(1),
            })
        });
        Ok(inspection(
            keys.user(),
            rows.collect::<Result<_, StoreError>>()?,
        ))
    }

    pub(super) async fn held_keys_matching(
        &self,
        namespace: &str,
        pattern: &Pattern,
    ) -> Result<Vec<String>, StoreError> {
        // Pages of names in order, so that a large table is read in bounded
        // steps and the answer stays bounded too.
        const PAGE: i64 = 1_000;
        let prefix = like_prefix(&format!("{namespace}:{{"));
        let mut found = Vec::new();
        let mut after = String::new();
        loop {
            let query = || {
                sqlx::query(&self.statements.held)
                    .bind(&after)
                    .bind(&prefix)
                    .bind(PAGE)
                    .bind(&after)
                    .bind(&prefix)
                    .bind(PAGE)
                    .bind(PAGE)
            };
            let rows = self.connections.rows(query, false).await?;
            let page = rows.len();
            for row in rows {
                let name = text(&row, 0)?;
                // A key's locks of several kinds are listed side by side.
                if let Some(user) = user_key_of(&name, namespace)
                    && pattern.matches(&user)
                    && found.last() != Some(&user)
                {
                    found.push(user);
                    if found.len() == MAX_LISTED {
                        return Ok(found);
                    }
                }
                after = name;
            }
            if page < PAGE as usize {
                return Ok(found);
            }
        }
    }

    pub(super) async fn force_release_all(
        &self,
        keys: &StoredKeys,
    ) -> Result<ForceReleased, StoreError> {
        let [fair, rw, permits, segments] = other_kinds(keys);
        let query = || {
            sqlx::query(&self.statements.force_release)
                .bind(keys.lease())
                .bind(&fair)
                .bind(&rw)
                .bind(&permits)
                .bind(&segments)
        };
        let rows = self.connections.rows(query, true).await?;
        let row = first(&rows, "force_release_all")?;
        self.connections.wake(row, 2).await;
        let removed = usize::try_from(number(row, 0)?.unwrap_or(0)).unwrap_or(0);
        let up_to = token_of(number(row, 1)?.unwrap_or(0));
        Ok(ForceReleased::new(removed, Some(up_to)))
    }
}

/// `prefix` as a `LIKE` pattern that matches the names starting with it.
fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
}
