//! Fenced writes to MySQL and MariaDB (feature `mysql`), through sqlx.
//!
//! Add a token column to each fenced table once:
//!
//! ```sql
//! ALTER TABLE accounts ADD COLUMN fence_token BIGINT NOT NULL DEFAULT 0;
//! ```
//!
//! and write with the pattern [`MySqlFence`] builds:
//!
//! ```sql
//! UPDATE accounts SET balance = ?, fence_token = ?
//!  WHERE id = ? AND fence_token <= ?
//! ```
//!
//! One row matched: the write happened (sqlx counts matched rows, not only
//! changed ones). None: either the row does not exist or a newer token
//! already wrote it; `MySqlFence` tells the two apart and reports the
//! second as `LockError::StaleToken`.
//!
//! A lock held in the same database (the MySQL store) needs no token
//! column: [`LockGuard::check_in`](crate::LockGuard::check_in) makes a
//! transaction's writes commit only while the lease holds.

mod transaction;

use super::sql_table::{FencedTable, sqlx_error, token_param, unwritten};
use crate::error::{LockError, Operation};
use crate::token::FencingToken;

/// MySQL's longest identifier, in bytes.
const LONGEST: usize = 64;

/// A sqlx query on MySQL, as [`MySqlFence::update`]'s `bind` takes and
/// returns it.
pub type MySqlQuery<'q> = sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>;

/// Fenced updates of one MySQL table, keyed by one column.
///
/// ```no_run
/// use lock_core::fence::mysql::MySqlFence;
///
/// # async fn credit(locker: lock_core::Locker, pool: sqlx::MySqlPool) -> Result<(), Box<dyn std::error::Error>> {
/// let accounts = MySqlFence::new("accounts", "id", "fence_token")?;
/// let guard = locker.lock("account:7").await?;
/// let mut connection = pool.acquire().await?;
/// // UPDATE accounts SET balance = balance + ?, fence_token = ? WHERE id = ? AND fence_token <= ?
/// let updated = accounts
///     .update(&mut connection, guard.token(), 7_i64, "balance = balance + ?", |q| q.bind(50_i64))
///     .await?;
/// assert_eq!(updated, 1, "account 7 exists");
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MySqlFence {
    names: FencedTable,
}

impl MySqlFence {
    /// Fenced updates of `table` (rows found by `key_column`, tokens kept
    /// in `fence_column`). Names must be plain identifiers (`db.table` for
    /// another database): they are written into the SQL.
    ///
    /// ```
    /// use lock_core::fence::mysql::MySqlFence;
    ///
    /// assert!(MySqlFence::new("billing.accounts", "id", "fence_token").is_ok());
    /// // Not a plain identifier: refused, naming what to fix.
    /// let err = MySqlFence::new("accounts", "id`; DROP TABLE x", "fence_token").unwrap_err();
    /// assert!(err.to_string().contains("key column"), "{err}");
    /// ```
    pub fn new(table: &str, key_column: &str, fence_column: &str) -> Result<Self, LockError> {
        Ok(MySqlFence {
            names: FencedTable::new(table, key_column, fence_column, LONGEST)?,
        })
    }

    /// The statement [`update`](Self::update) runs for `set`: its `?`
    /// first, then the token, the key and the token again.
    ///
    /// ```
    /// use lock_core::fence::mysql::MySqlFence;
    ///
    /// let accounts = MySqlFence::new("accounts", "id", "fence_token")?;
    /// assert_eq!(
    ///     accounts.statement("balance = balance + ?"),
    ///     "UPDATE accounts SET balance = balance + ?, fence_token = ? \
    ///      WHERE id = ? AND fence_token <= ?",
    /// );
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn statement(&self, set: &str) -> String {
        self.names.update(set, "?", "?")
    }

    /// `UPDATE <table> SET <set>, <fence> = token WHERE <key> = key AND
    /// <fence> <= token`, on a connection of your pool or inside your
    /// transaction (`&mut *tx`). `bind` binds the `?` of `set`, in order.
    /// Returns the rows matched (0: no such row); a newer token on the row
    /// is [`LockError::StaleToken`] and changes nothing.
    ///
    /// ```no_run
    /// use lock_core::LockError;
    /// use lock_core::fence::mysql::MySqlFence;
    ///
    /// # async fn credit(locker: lock_core::Locker, pool: sqlx::MySqlPool) -> Result<(), Box<dyn std::error::Error>> {
    /// let accounts = MySqlFence::new("accounts", "id", "fence_token")?;
    /// let guard = locker.lock("account:7").await?;
    /// let mut transaction = pool.begin().await?;
    /// let set = "balance = balance + ?";
    /// match accounts.update(&mut transaction, guard.token(), 7_i64, set, |q| q.bind(50_i64)).await {
    ///     Ok(_) => transaction.commit().await?,
    ///     // A later holder wrote the row: this one is out of date.
    ///     Err(LockError::StaleToken { .. }) => transaction.rollback().await?,
    ///     Err(other) => return Err(other.into()),
    /// }
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn update<K>(
        &self,
        connection: &mut sqlx::MySqlConnection,
        token: FencingToken,
        key: K,
        set: &str,
        bind: impl for<'q> FnOnce(MySqlQuery<'q>) -> MySqlQuery<'q>,
    ) -> Result<u64, LockError>
    where
        K: for<'q> sqlx::Encode<'q, sqlx::MySql>
            + sqlx::Type<sqlx::MySql>
            + Clone
            + Send
            + std::fmt::Debug,
    {
        let resource = self.names.resource(&key);
        let failed =
            |err| LockError::from_store(&resource, Operation::FencedWrite, sqlx_error(err));
        let token_value = token_param(token)?;
        let statement = self.statement(set);
        let query = bind(sqlx::query(&statement))
            .bind(token_value)
            .bind(key.clone())
            .bind(token_value);
        let updated = query.execute(&mut *connection).await.map_err(failed)?;
        if updated.rows_affected() > 0 {
            return Ok(updated.rows_affected());
        }
        let newest: Option<i64> = sqlx::query_scalar(&self.names.newest("?"))
            .bind(key)
            .fetch_optional(&mut *connection)
            .await
            .map_err(failed)?;
        unwritten(&resource, token, newest)
    }
}
