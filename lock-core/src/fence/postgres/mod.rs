//! Fenced writes to PostgreSQL (feature `postgres`), with tokio-postgres,
//! or with sqlx (feature `sqlx`: [`PgFence::update_sqlx`]).
//!
//! tokio-postgres is what the PostgreSQL store itself runs on: it takes
//! plain SQL at run time (no compile-time database), and its
//! `GenericClient` covers clients and transactions alike. Services that
//! write through sqlx use the same statements through their own pool.
//!
//! Add a token column to each fenced table once:
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
//! ```
//!
//! and write with the pattern [`PgFence`] builds:
//!
//! ```sql
//! UPDATE accounts SET balance = $1, fence_token = $2
//!  WHERE id = $3 AND fence_token <= $2
//! ```
//!
//! One row updated: the write happened. None: either the row does not exist
//! or a newer token already wrote it; `PgFence` tells the two apart and
//! reports the second as `LockError::StaleToken`.
//!
//! A lock held in the same database (the PostgreSQL store) needs no token
//! column: [`LockGuard::check_in`](crate::LockGuard::check_in) makes a
//! transaction's writes commit only while the lease holds. It takes a
//! tokio-postgres transaction, or with feature `sqlx` a sqlx one
//! ([`SqlTransaction`](crate::fence::SqlTransaction)).

mod transaction;

use tokio_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use self::transaction::postgres_error;
#[cfg(feature = "sqlx")]
use super::sql_table::sqlx_error;
use super::sql_table::{FencedTable, token_param, unwritten};
use crate::error::{LockError, Operation};
use crate::token::FencingToken;

/// Fenced updates of one table, keyed by one column.
///
/// ```no_run
/// use lock_core::fence::postgres::PgFence;
/// use lock_core::{LockError, Locker};
///
/// # async fn pay(locker: Locker, db: tokio_postgres::Client) -> Result<(), LockError> {
/// let accounts = PgFence::new("accounts", "id", "fence_token")?;
/// let guard = locker.lock("account:7").await?;
/// // UPDATE accounts SET balance = balance + $1, fence_token = $2 WHERE id = $3 AND fence_token <= $2
/// accounts.update(&db, guard.token(), &7_i64, "balance = balance + $1", &[&50_i64]).await?;
/// guard.release().await
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgFence {
    names: FencedTable,
}

/// PostgreSQL's longest identifier, in bytes.
const LONGEST: usize = 63;

fn unavailable(resource: &str, err: tokio_postgres::Error) -> LockError {
    LockError::from_store(resource, Operation::FencedWrite, postgres_error(err))
}

impl PgFence {
    /// Fenced updates of `table` (rows found by `key_column`, tokens kept in
    /// `fence_column`). Names must be plain identifiers: they are written
    /// into the SQL.
    ///
    /// ```
    /// use lock_core::fence::postgres::PgFence;
    ///
    /// assert!(PgFence::new("billing.accounts", "id", "fence_token").is_ok());
    /// // Not a plain identifier: refused, naming what to fix.
    /// let err = PgFence::new("accounts; DROP TABLE x", "id", "fence_token").unwrap_err();
    /// assert!(err.to_string().contains("table"), "{err}");
    /// ```
    pub fn new(table: &str, key_column: &str, fence_column: &str) -> Result<Self, LockError> {
        Ok(PgFence {
            names: FencedTable::new(table, key_column, fence_column, LONGEST)?,
        })
    }

    /// The statement `update` runs for `set` with `params` set parameters.
    ///
    /// ```
    /// use lock_core::fence::postgres::PgFence;
    ///
    /// let accounts = PgFence::new("accounts", "id", "fence_token")?;
    /// assert_eq!(
    ///     accounts.statement("balance = balance + $1", 1),
    ///     "UPDATE accounts SET balance = balance + $1, fence_token = $2 \
    ///      WHERE id = $3 AND fence_token <= $2",
    /// );
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn statement(&self, set: &str, params: usize) -> String {
        let (token, key) = (params + 1, params + 2);
        self.names
            .update(set, &format!("${token}"), &format!("${key}"))
    }

    /// `UPDATE <table> SET <set>, <fence> = token WHERE <key> = key AND
    /// <fence> <= token`. `set` uses `$1..$n` for `params`. Returns the rows
    /// updated (0: no such row); a newer token on the row is
    /// [`LockError::StaleToken`] and changes nothing.
    ///
    /// ```no_run
    /// use lock_core::fence::postgres::PgFence;
    /// use lock_core::{LockError, Locker};
    ///
    /// # async fn credit(locker: Locker, db: tokio_postgres::Client) -> Result<(), LockError> {
    /// let accounts = PgFence::new("accounts", "id", "fence_token")?;
    /// let guard = locker.lock("account:7").await?;
    /// let updated = accounts
    ///     .update(&db, guard.token(), &7_i64, "balance = balance + $1", &[&50_i64])
    ///     .await?;
    /// assert_eq!(updated, 1, "account 7 exists");
    /// guard.release().await
    /// # }
    /// ```
    pub async fn update(
        &self,
        client: &impl GenericClient,
        token: FencingToken,
        key: &(dyn ToSql + Sync),
        set: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, LockError> {
        let resource = self.names.resource(&key);
        let token_value = token_param(token)?;
        let mut all: Vec<&(dyn ToSql + Sync)> = params.to_vec();
        all.push(&token_value);
        all.push(key);
        let statement = self.statement(set, params.len());
        let updated = client
            .execute(statement.as_str(), &all)
            .await
            .map_err(|err| unavailable(&resource, err))?;
        if updated > 0 {
            return Ok(updated);
        }
        let row = client
            .query_opt(self.names.newest("$1").as_str(), &[key])
            .await
            .map_err(|err| unavailable(&resource, err))?;
        let newest = row.map(|row| row.try_get::<_, i64>(0)).transpose();
        unwritten(
            &resource,
            token,
            newest.map_err(|err| unavailable(&resource, err))?,
        )
    }
}

#[cfg(feature = "sqlx")]
impl PgFence {
    /// [`update`](Self::update) through sqlx (feature `sqlx`), on a
    /// connection of your pool or inside your transaction (`&mut *tx`).
    /// `bind` binds the `$1..$n` of `set`, in order; the token and the key
    /// are `$n+1` and `$n+2`. Returns the rows updated (0: no such row); a newer token
    /// on the row is [`LockError::StaleToken`] and changes nothing.
    ///
    /// ```no_run
    /// use lock_core::fence::postgres::PgFence;
    ///
    /// # async fn credit(locker: lock_core::Locker, pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
    /// let accounts = PgFence::new("accounts", "id", "fence_token")?;
    /// let guard = locker.lock("account:7").await?;
    /// let mut connection = pool.acquire().await?;
    /// let updated = accounts
    ///     .update_sqlx(&mut connection, guard.token(), 7_i64, "balance = balance + $1", |q| {
    ///         q.bind(50_i64)
    ///     })
    ///     .await?;
    /// assert_eq!(updated, 1, "account 7 exists");
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn update_sqlx<K>(
        &self,
        connection: &mut sqlx::PgConnection,
        token: FencingToken,
        key: K,
        set: &str,
        bind: impl for<'q> FnOnce(PgQuery<'q>) -> PgQuery<'q>,
    ) -> Result<u64, LockError>
    where
        K: for<'q> sqlx::Encode<'q, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + Clone
            + Send
            + std::fmt::Debug,
    {
        let resource = self.names.resource(&key);
        let failed =
            |err| LockError::from_store(&resource, Operation::FencedWrite, sqlx_error(err));
        let token_value = token_param(token)?;
        // The token and the key follow the highest `$n` of `set`.
        let statement = self.statement(set, highest_parameter(set));
        let query = bind(sqlx::query(&statement))
            .bind(token_value)
            .bind(key.clone());
        let updated = query.execute(&mut *connection).await.map_err(failed)?;
        if updated.rows_affected() > 0 {
            return Ok(updated.rows_affected());
        }
        let newest: Option<i64> = sqlx::query_scalar(&self.names.newest("$1"))
            .bind(key)
            .fetch_optional(&mut *connection)
            .await
            .map_err(failed)?;
        unwritten(&resource, token, newest)
    }
}

/// The highest `$n` in `set` (0 for none).
#[cfg(feature = "sqlx")]
fn highest_parameter(set: &str) -> usize {
    set.split('$')
        .skip(1)
        .filter_map(|rest| {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            rest[..digits].parse().ok()
        })
        .max()
        .unwrap_or(0)
}

/// A sqlx query on PostgreSQL, as [`PgFence::update_sqlx`]'s `bind` takes
/// and returns it.
#[cfg(feature = "sqlx")]
pub type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_follow_the_pattern() {
        let fence = PgFence::new("accounts", "id", "fence_token").unwrap();
        assert_eq!(
            fence.statement("balance = $1", 1),
            "UPDATE accounts SET balance = $1, fence_token = $2 WHERE id = $3 AND fence_token <= $2"
        );
    }

    #[cfg(feature = "sqlx")]
    #[test]
    fn the_token_and_key_follow_the_highest_parameter_of_set() {
        assert_eq!(highest_parameter("balance = balance + $1"), 1);
        assert_eq!(highest_parameter("a = $2, b = $1 + $2"), 2);
        assert_eq!(highest_parameter("touched = now()"), 0);
        assert_eq!(highest_parameter("a = $10"), 10);
    }
}
