//! The MySQL transactions [`LockGuard::check_in`](crate::LockGuard::check_in)
//! checks a lease in: sqlx's.

use futures_util::future::BoxFuture;

use crate::error::StoreError;
use crate::fence::check_in::SqlTransaction;
use crate::fence::check_in::sealed::{LeaseRow, Sealed};
use crate::fence::sql_table::sqlx_error;

/// The check-in's statement: the shared lock holds off a takeover (which
/// needs the row exclusively) until the transaction ends. In the
/// connection's database, as `USE` or the URL chose it.
fn statement(row: &LeaseRow<'_>) -> String {
    format!(
        "SELECT 1 FROM `{ns}_{table}` WHERE name = ? AND owner = ? \
         AND token > 0 AND expires > UTC_TIMESTAMP(6) LOCK IN SHARE MODE",
        ns = row.namespace,
        table = row.table,
    )
}

impl SqlTransaction for &mut sqlx::MySqlConnection {}

impl Sealed for &mut sqlx::MySqlConnection {
    fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Box::pin(async move {
            let statement = statement(&row);
            let query = sqlx::query(&statement)
                .bind(row.name.as_bytes())
                .bind(row.owner.as_bytes());
            let found = query.fetch_optional(self).await;
            found.map(|found| found.is_some()).map_err(sqlx_error)
        })
    }
}

impl SqlTransaction for &mut sqlx::Transaction<'_, sqlx::MySql> {}

impl Sealed for &mut sqlx::Transaction<'_, sqlx::MySql> {
    fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
    where
        Self: 'a,
    {
        Sealed::lease_row(&mut **self, row)
    }
}
