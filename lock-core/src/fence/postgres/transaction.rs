//! The PostgreSQL transactions [`LockGuard::check_in`](crate::LockGuard::check_in)
//! checks a lease in: tokio-postgres's and, with feature `sqlx`, sqlx's.

use futures_util::future::BoxFuture;

use crate::error::{Applied, StoreError};
use crate::fence::check_in::SqlTransaction;
use crate::fence::check_in::sealed::{LeaseRow, Sealed};
#[cfg(feature = "sqlx")]
use crate::fence::sql_table::sqlx_error;

/// The check-in's statement: `FOR KEY SHARE` holds off a takeover (which
/// needs the row `FOR UPDATE`) and lets renewals through.
fn statement(row: &LeaseRow<'_>) -> String {
    format!(
        "SELECT 1 FROM \"{schema}\".{table} WHERE name = $1 AND owner = $2 \
         AND token > 0 AND expires > clock_timestamp() FOR KEY SHARE",
        schema = row.namespace,
        table = row.table,
    )
}

impl SqlTransaction for &tokio_postgres::Transaction<'_> {}

impl Sealed for &tokio_postgres::Transaction<'_> {
    fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let found = self
                .query_opt(&statement(&row), &[&row.name, &row.owner])
                .await;
            found.map(|found| found.is_some()).map_err(postgres_error)
        })
    }
}

#[cfg(feature = "sqlx")]
impl SqlTransaction for &mut sqlx::PgConnection {}

#[cfg(feature = "sqlx")]
impl Sealed for &mut sqlx::PgConnection {
    fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let statement = statement(&row);
            let query = sqlx::query(&statement).bind(row.name).bind(row.owner);
            let found = query.fetch_optional(self).await;
            found.map(|found| found.is_some()).map_err(sqlx_error)
        })
    }
}

#[cfg(feature = "sqlx")]
impl SqlTransaction for &mut sqlx::Transaction<'_, sqlx::Postgres> {}

#[cfg(feature = "sqlx")]
impl Sealed for &mut sqlx::Transaction<'_, sqlx::Postgres> {
    fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Sealed::lease_row(&mut **self, row)
    }
}

/// A tokio-postgres error as the store's: a closed connection may have run
/// the statement.
pub(super) fn postgres_error(err: tokio_postgres::Error) -> StoreError {
    let unknown = err.is_closed();
    StoreError::transient(err, Applied::maybe_if(unknown))
}
