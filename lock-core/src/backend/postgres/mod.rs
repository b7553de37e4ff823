//! The PostgreSQL backend: leases as rows of a table in the namespace's
//! schema, taken and ended by owner-checked statements, with expiries on
//! the server clock, tokens from a durable sequence, and releases told by
//! `NOTIFY`.
//!
//! Rows rather than advisory locks: an advisory lock belongs to a session,
//! so it breaks behind a transaction-pooling proxy and has no ttl, no
//! watchdog and no token; a row is a lease like every other store's.

mod connect;
mod errors;
mod listen;
mod poll;
mod schema;
mod transport;

use std::time::Duration;

use deadpool_postgres::Pool;

use self::errors::{bounded, store_error};
use self::listen::Listener;
use self::poll::Poll;
use self::schema::{Schema, Sql};
use super::lock_tables::{
    Inspected, Taken, from_millis, inspection, millis, mode_of, name_of, other_kinds, token_of,
};
use super::{Attempt, Grant, LockStore, ReleaseSignal, StoreFuture};
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::inspect::{ForceReleased, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::kind::LockKind;

/// Leases in PostgreSQL: one row per held lock in the table `leases` of
/// the schema named after the namespace, over a small pool of connections
/// (deadpool-postgres), and one more connection that `LISTEN`s for
/// releases.
///
/// Each operation is one statement: acquire and release call the
/// functions the schema holds (`acquire` inserts, takes over an expired
/// row, or answers how long the holder has left; `release` deletes the
/// owner's row and notifies waiters), renewal is an owner-checked
/// `UPDATE`. A waiter sends nothing until a release is notified or the
/// holder's lease runs out.
///
/// The other kinds (fair, read-write, semaphore, striped) keep one row
/// per holder or queue entry in the table `holders`, taken and ended by
/// the functions `take` and `give`, each deciding under a transaction
/// lock of its lock's name, as a Redis script decides alone.
///
/// Tokens come from the schema's sequence, drawn once the row is the
/// grantee's, so they rise in grant order per key and across kinds, also
/// across a restart, and across a crash of a server that commits
/// synchronously (not across a failover to an asynchronous standby).
/// Keeps every kind of lock.
///
/// Behind a transaction-pooling proxy such as PgBouncer (`pgbouncer=true`
/// in the URL), statements are sent unprepared and without startup
/// options, and waiters are woken by a `LISTEN` connection to the
/// `listen_url` the URL names, else by polling every
/// [`POLL_INTERVAL`](Self::POLL_INTERVAL).
pub struct PostgresBackend {
    connections: Connections,
    schema: Schema,
    wakeups: Wakeups,
    description: String,
    statements: Statements,
    /// Ends the sweep with the backend.
    _sweep: super::sweep::Sweep,
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("store", &crate::backend::LockStore::describe(self))
            .finish_non_exhaustive()
    }
}

/// The pool, and how statements go over it.
#[derive(Clone)]
struct Connections {
    pool: Pool,
    timeout: Duration,
    /// Behind a transaction pooler: no statement is prepared.
    pooled: bool,
}

impl Connections {
    /// Runs `sql` with `params` on a pooled connection, prepared once per
    /// connection, or unprepared behind a transaction pooler (where the next
    /// transaction may run on another server connection, without the
    /// prepared statement); `writes` as in [`bounded`].
    async fn query(
        &self,
        sql: &Sql,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        writes: bool,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let client = checkout(&self.pool, self.timeout).await?;
        if self.pooled {
            let typed: Vec<_> = params
                .iter()
                .copied()
                .zip(sql.types.iter().cloned())
                .collect();
            return bounded(self.timeout, writes, client.query_typed(&sql.text, &typed)).await;
        }
        let prepare = client.prepare_typed_cached(&sql.text, sql.types);
        let statement = bounded(self.timeout, false, prepare).await?;
        bounded(self.timeout, writes, client.query(&statement, params)).await
    }
}

/// What wakes waiters: releases told by `NOTIFY`, or a poll.
enum Wakeups {
    Notified(Listener),
    Polled(Poll),
}

/// Each statement, made once per backend.
struct Statements {
    acquire: Sql,
    renew: Sql,
    release: Sql,
    announce: Sql,
    take: Sql,
    renew_holder: Sql,
    give: Sql,
    inspect: Sql,
    held: Sql,
    force_release: Sql,
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

/// Column `index` of `row`, as `T`. A row that does not read came after
/// the statement ran, so what it did is unknown (a grant is undone by owner
/// value).
fn column<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r tokio_postgres::Row,
    index: usize,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(|err| store_error(err, true))
}

/// A connection of `pool`, within `timeout`.
async fn checkout(pool: &Pool, timeout: Duration) -> Result<deadpool_postgres::Object, StoreError> {
    match tokio::time::timeout(timeout, pool.get()).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(deadpool_postgres::PoolError::Backend(err))) => Err(store_error(err, false)),
        Ok(Err(err)) => Err(StoreError::not_applied(err)),
        Err(_) => Err(StoreError::timed_out(timeout).unknown(false)),
    }
}

impl PostgresBackend {
    /// The longest namespace a PostgreSQL store takes: the namespace names
    /// a schema, and PostgreSQL cuts longer names.
    pub const MAX_NAMESPACE_LEN: usize = schema::MAX_NAME_LEN;

    /// How often a waiter asks again where no `LISTEN` connection tells it
    /// of releases (behind a transaction pooler without a `listen_url`).
    pub const POLL_INTERVAL: Duration = poll::INTERVAL;

    /// The schema's name (the namespace).
    pub fn schema(&self) -> &str {
        &self.schema.name
    }
}

impl LockStore for PostgresBackend {
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
            let Some((mode, size)) = mode_of(kind, "PostgreSQL")? else {
                return self.acquire_lease(keys, owner, ttl).await;
            };
            let name = keys.of_kind(kind);
            let ttl_ms = millis(ttl);
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
                [&name, &owner, &mode, &size, &ttl_ms];
            let rows = self
                .connections
                .query(&self.statements.take, &params, true)
                .await?;
            let row = rows
                .first()
                .ok_or_else(|| StoreError::not_applied("take answered no row"))?;
            let taken = Taken {
                token: column(row, 0)?,
                place: column::<Option<i32>>(row, 1)?.map(i64::from),
                wait: column(row, 2)?,
                queued: column(row, 3)?,
                stored: column::<Option<i32>>(row, 4)?.map(i64::from),
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
            let (name, ttl) = (name_of(keys, kind), millis(ttl));
            let name: &str = &name;
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&name, &owner, &ttl];
            Ok(self.connections.query(sql, &params, true).await?.len() == 1)
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
            let rows = self
                .connections
                .query(sql, &[&&*name, &owner], true)
                .await?;
            let live: Option<bool> = match rows.first() {
                Some(row) => column(row, 0)?,
                None => None,
            };
            Ok(live == Some(true))
        })
    }

    fn announce<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
    ) -> StoreFuture<'a, Result<(), StoreError>> {
        StoreFuture::new(async move {
            let name = name_of(keys, kind);
            let sql = &self.statements.announce;
            self.connections
                .query(sql, &[&&*name], true)
                .await
                .map(drop)
        })
    }

    fn subscribe<'a>(
        &'a self,
        keys: &'a StoredKeys,
        kind: LockKind,
        queued_owner: Option<&'a str>,
    ) -> StoreFuture<'a, Result<ReleaseSignal, StoreError>> {
        StoreFuture::new(async move {
            // A queue entry is woken on its own route (`<name> <owner>`), as the
            // functions notify it.
            let listener = match &self.wakeups {
                Wakeups::Notified(listener) => listener,
                Wakeups::Polled(poll) => return Ok(poll.subscribe()),
            };
            let name = name_of(keys, kind);
            match queued_owner {
                Some(owner) => listener.subscribe(&format!("{name} {owner}")),
                None => listener.subscribe(&name),
            }
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

impl PostgresBackend {
    /// Takes the plain lock's lease (the table `leases`).
    async fn acquire_lease(
        &self,
        keys: &StoredKeys,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        let rows = self
            .connections
            .query(
                &self.statements.acquire,
                &[&keys.lease(), &owner, &millis(ttl)],
                true,
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::not_applied("acquire answered no row"))?;
        let token: Option<i64> = column(row, 0)?;
        let remaining: Option<i64> = column(row, 1)?;
        Ok(match token {
            Some(token) => Attempt::Acquired(Grant::new(token_of(token), ttl)),
            None => Attempt::Held {
                remaining: remaining.map(from_millis),
            },
        })
    }
}

impl PostgresBackend {
    pub(super) async fn inspection_of(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let others = other_kinds(keys).to_vec();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&keys.lease(), &others];
        let rows = self
            .connections
            .query(&self.statements.inspect, &params, false)
            .await?;
        let rows = rows.iter().map(|row| {
            Ok(Inspected {
                mode: column(row, 0)?,
                owner: column(row, 1)?,
                token: column(row, 2)?,
                remaining_ms: column(row, 3)?,
                age_ms: column(row, 4)?,
                segment: column::<i32>(row, 5)?.into(),
                size: column::<i32>(row, 6)?.into(),
                seq: column(row, 7)?,
                waited: column(row, 8)?,
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
        let prefix = format!("{namespace}:{{");
        let mut found = Vec::new();
        let mut after = String::new();
        loop {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&after, &PAGE, &prefix];
            let rows = self
                .connections
                .query(&self.statements.held, &params, false)
                .await?;
            let page = rows.len();
            for row in rows {
                let name: String = column(&row, 0)?;
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
        let others = other_kinds(keys).to_vec();
        let rows = self
            .connections
            .query(
                &self.statements.force_release,
                &[&keys.lease(), &others],
                true,
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::not_applied("force_release answered no row"))?;
        let removed = usize::try_from(column::<i64>(row, 0)?).unwrap_or(0);
        Ok(ForceReleased::new(removed, Some(token_of(column(row, 1)?))))
    }
}
