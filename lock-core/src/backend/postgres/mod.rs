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
mod schema;

use std::time::Duration;

use deadpool_postgres::Pool;

use self::errors::{bounded, store_error};
use self::listen::Listener;
use self::schema::Schema;
use super::{Attempt, Grant, LockKind, Operators, ReleaseSignal, Store};
use crate::inspect::{Holder, Inspection, MAX_LISTED, Pattern, user_key_of};
use crate::keys::StoredKeys;
use crate::store_error::StoreError;
use crate::token::FencingToken;

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
/// Tokens come from the schema's sequence, drawn once the row is the
/// grantee's, so they rise in grant order per key, also across a restart,
/// and across a crash of a server that commits synchronously (not across
/// a failover to an asynchronous standby). Keeps the plain lock and the
/// multi-lock over it.
pub struct PostgresBackend {
    pool: Pool,
    schema: Schema,
    listener: Listener,
    timeout: Duration,
    description: String,
    statements: Statements,
}

/// The text of each statement, made once per backend.
struct Statements {
    acquire: String,
    renew: String,
    release: String,
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
            inspect: schema.inspect(),
            held: schema.held(),
            force_release: schema.force_release(),
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// A duration the server gave in milliseconds (none below zero).
fn from_millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// A token the server gave (the sequence starts at 1).
fn token_of(token: i64) -> FencingToken {
    FencingToken::new(u64::try_from(token).unwrap_or(0))
}

/// Column `index` of `row`, as `T`.
fn column<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r tokio_postgres::Row,
    index: usize,
) -> Result<T, StoreError> {
    row.try_get(index).map_err(|err| store_error(err, false))
}

/// A connection of `pool`, within `timeout`.
async fn checkout(pool: &Pool, timeout: Duration) -> Result<deadpool_postgres::Object, StoreError> {
    match tokio::time::timeout(timeout, pool.get()).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(deadpool_postgres::PoolError::Backend(err))) => Err(store_error(err, false)),
        Ok(Err(err)) => Err(StoreError::new(err, false)),
        Err(_) => Err(StoreError::timed_out(timeout).unknown(false)),
    }
}

impl PostgresBackend {
    /// The longest namespace a PostgreSQL store takes: the namespace names
    /// a schema, and PostgreSQL cuts longer names.
    pub const MAX_NAMESPACE_LEN: usize = schema::MAX_NAME_LEN;

    /// A pooled connection and `sql` prepared on it (once per connection).
    async fn prepared(
        &self,
        sql: &str,
    ) -> Result<(deadpool_postgres::Object, tokio_postgres::Statement), StoreError> {
        let client = checkout(&self.pool, self.timeout).await?;
        let statement = bounded(self.timeout, false, client.prepare_cached(sql)).await?;
        Ok((client, statement))
    }

    /// Runs `sql` with `params`, expecting rows; `writes` as in [`bounded`].
    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
        writes: bool,
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let (client, statement) = self.prepared(sql).await?;
        bounded(self.timeout, writes, client.query(&statement, params)).await
    }

    /// The schema's name (the namespace).
    pub fn schema(&self) -> &str {
        &self.schema.name
    }
}

impl Store for PostgresBackend {
    async fn acquire(
        &self,
        keys: &StoredKeys,
        kind: LockKind,
        owner: &str,
        ttl: Duration,
    ) -> Result<Attempt, StoreError> {
        if kind != LockKind::Exclusive {
            return Err(StoreError::unsupported(kind));
        }
        let rows = self
            .query(
                &self.statements.acquire,
                &[&keys.lease(), &owner, &millis(ttl)],
                true,
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::new("acquire answered no row", false))?;
        let token: Option<i64> = column(row, 0)?;
        let remaining: Option<i64> = column(row, 1)?;
        Ok(match token {
            Some(token) => Attempt::Acquired(Grant::new(token_of(token), ttl)),
            None => Attempt::Held {
                remaining: remaining.map(from_millis),
            },
        })
    }

    async fn renew(
        &self,
        keys: &StoredKeys,
        _kind: LockKind,
        owner: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let (client, statement) = self.prepared(&self.statements.renew).await?;
        let (lease, ttl) = (keys.lease(), millis(ttl));
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&lease, &owner, &ttl];
        let renewed = client.execute(&statement, &params);
        Ok(bounded(self.timeout, true, renewed).await? == 1)
    }

    async fn release(
        &self,
        keys: &StoredKeys,
        _kind: LockKind,
        owner: &str,
    ) -> Result<bool, StoreError> {
        let rows = self
            .query(&self.statements.release, &[&keys.lease(), &owner], true)
            .await?;
        let live: Option<bool> = match rows.first() {
            Some(row) => column(row, 0)?,
            None => None,
        };
        Ok(live == Some(true))
    }

    async fn subscribe(
        &self,
        keys: &StoredKeys,
        _kind: LockKind,
        _queued_owner: Option<&str>,
    ) -> Result<ReleaseSignal, StoreError> {
        self.listener.subscribe(keys.lease())
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}

impl Operators for PostgresBackend {
    async fn inspect(&self, keys: &StoredKeys) -> Result<Inspection, StoreError> {
        let rows = self
            .query(&self.statements.inspect, &[&keys.lease()], false)
            .await?;
        let mut inspection = Inspection::new(keys.user());
        for row in &rows {
            let owner: String = column(row, 0)?;
            let holder = Holder::new(LockKind::Exclusive, owner, token_of(column(row, 1)?));
            inspection.holders.push(
                holder
                    .remaining(from_millis(column(row, 2)?))
                    .age(from_millis(column(row, 3)?)),
            );
        }
        Ok(inspection)
    }

    async fn held_keys(
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
            let rows = self.query(&self.statements.held, &params, false).await?;
            let page = rows.len();
            for row in rows {
                let name: String = column(&row, 0)?;
                if let Some(user) = user_key_of(&name, namespace)
                    && pattern.matches(&user)
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

    async fn force_release(&self, keys: &StoredKeys) -> Result<usize, StoreError> {
        let rows = self
            .query(&self.statements.force_release, &[&keys.lease()], true)
            .await?;
        let removed: i64 = match rows.first() {
            Some(row) => column(row, 0)?,
            None => 0,
        };
        Ok(usize::try_from(removed).unwrap_or(0))
    }
}
