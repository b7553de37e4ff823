//! What [`LockGuard::check_in`](crate::LockGuard::check_in) checks a lease
//! in: an open transaction on the database the PostgreSQL store keeps its
//! leases in, from tokio-postgres or, with feature `sqlx`, from sqlx.

use futures_util::future::BoxFuture;

use crate::error::{Applied, StoreError};

/// An open PostgreSQL transaction that
/// [`LockGuard::check_in`](crate::LockGuard::check_in) locks a lease row
/// in, so that its writes commit only while the lease holds.
///
/// Implemented for `&tokio_postgres::Transaction` and, with feature `sqlx`,
/// for `&mut sqlx::Transaction<'_, sqlx::Postgres>` and
/// `&mut sqlx::PgConnection` (a connection inside a transaction the caller
/// began). Sealed: no other type can be one.
///
/// ```no_run
/// # #[cfg(feature = "sqlx")]
/// # async fn pay(locker: lock_core::Locker, pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let guard = locker.lock("account:7").await?;
/// let mut transaction = pool.begin().await?;
/// guard.check_in(&mut transaction).await?;
/// sqlx::query("UPDATE accounts SET balance = balance + 50 WHERE id = 7")
///     .execute(&mut *transaction)
///     .await?;
/// transaction.commit().await?; // only while the lease holds
/// guard.release().await?;
/// # Ok(())
/// # }
/// ```
pub trait PgTransaction: sealed::Sealed {}

pub(super) mod sealed {
    use futures_util::future::BoxFuture;

    use crate::error::StoreError;

    /// Runs the check-in's statement: whether it found the lease row
    /// (`$1` the stored name, `$2` the owner value), locking it.
    pub trait Sealed: Send {
        fn lease_row<'a>(
            self,
            statement: &'a str,
            name: &'a str,
            owner: &'a str,
        ) -> BoxFuture<'a, Result<bool, StoreError>>
        where
            Self: 'a;
    }
}

impl PgTransaction for &tokio_postgres::Transaction<'_> {}

impl sealed::Sealed for &tokio_postgres::Transaction<'_> {
    fn lease_row<'a>(
        self,
        statement: &'a str,
        name: &'a str,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let row = self.query_opt(statement, &[&name, &owner]).await;
            row.map(|row| row.is_some()).map_err(postgres_error)
        })
    }
}

#[cfg(feature = "sqlx")]
impl PgTransaction for &mut sqlx::PgConnection {}

#[cfg(feature = "sqlx")]
impl sealed::Sealed for &mut sqlx::PgConnection {
    fn lease_row<'a>(
        self,
        statement: &'a str,
        name: &'a str,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let query = sqlx::query(statement).bind(name).bind(owner);
            let row = query.fetch_optional(self).await;
            row.map(|row| row.is_some()).map_err(sqlx_error)
        })
    }
}

#[cfg(feature = "sqlx")]
impl PgTransaction for &mut sqlx::Transaction<'_, sqlx::Postgres> {}

#[cfg(feature = "sqlx")]
impl sealed::Sealed for &mut sqlx::Transaction<'_, sqlx::Postgres> {
    fn lease_row<'a>(
        self,
        statement: &'a str,
        name: &'a str,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        sealed::Sealed::lease_row(&mut **self, statement, name, owner)
    }
}

/// A tokio-postgres error as the store's: a closed connection may have run
/// the statement.
pub(super) fn postgres_error(err: tokio_postgres::Error) -> StoreError {
    let unknown = err.is_closed();
    StoreError::transient(err, Applied::maybe_if(unknown))
}

/// A sqlx error as the store's: a broken connection may have run the
/// statement.
#[cfg(feature = "sqlx")]
pub(super) fn sqlx_error(err: sqlx::Error) -> StoreError {
    let unknown = matches!(err, sqlx::Error::Io(_));
    StoreError::transient(err, Applied::maybe_if(unknown))
}
