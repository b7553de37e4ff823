//! The lease-checked transaction: [`LockGuard::check_in`] locks the lease's
//! row inside the caller's own transaction on the database a SQL store
//! keeps its leases in, so that the transaction's writes commit only while
//! the lease holds, with no token column.

use crate::error::{LockError, LossReason, Operation};
use crate::guard::LockGuard;

/// An open transaction that [`LockGuard::check_in`] locks a lease row in:
/// on PostgreSQL (feature `postgres`) `&tokio_postgres::Transaction` and,
/// with feature `sqlx`, `&mut sqlx::Transaction<'_, sqlx::Postgres>` or
/// `&mut sqlx::PgConnection`; on MySQL (feature `mysql`) `&mut
/// sqlx::Transaction<'_, sqlx::MySql>` or `&mut sqlx::MySqlConnection`. A
/// connection must be inside a transaction the caller began. Sealed: no
/// other type can be one.
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
pub trait SqlTransaction: sealed::Sealed {}

pub(super) mod sealed {
    use futures_util::future::BoxFuture;

    use crate::error::StoreError;

    /// The lease row a check-in locks: `name` and `owner` in the table
    /// `table` (`leases` for the plain lock, `holders` for the others) of
    /// the store's `namespace`.
    #[derive(Debug)]
    pub struct LeaseRow<'a> {
        pub namespace: &'a str,
        pub table: &'static str,
        pub name: &'a str,
        pub owner: &'a str,
    }

    /// Locks `row` for the rest of the transaction, if it is live: whether
    /// it was.
    pub trait Sealed: Send {
        fn lease_row<'a>(self, row: LeaseRow<'a>) -> BoxFuture<'a, Result<bool, StoreError>>
        where
            Self: 'a;
    }
}

impl LockGuard {
    /// Checks, inside `transaction`, that this guard's lease is still held
    /// in a SQL store (PostgreSQL, MySQL) in the same database, and that no
    /// other owner is granted the key until the transaction ends: the
    /// lease row is locked in the transaction, and a takeover needs that
    /// row. Until the commit or rollback a waiter finds the lease held,
    /// even past its expiry, and waits for the release. Writes made after
    /// the check therefore never interleave with the next holder's, with no
    /// token column.
    ///
    /// `transaction` is any [`SqlTransaction`]. On PostgreSQL the row is
    /// locked `FOR KEY SHARE`: renewals go on meanwhile. MySQL has no lock
    /// that lets a renewal through (`LOCK IN SHARE MODE`): until the
    /// transaction ends, the lease's renewals and release and every request
    /// for the key wait for it, so keep it well within the ttl. There, the
    /// connection's default database must be the store's.
    ///
    /// A lease that expired or changed owner is [`LockError::Lost`] (and
    /// [`lost`](Self::lost) resolves): roll the transaction back. The role
    /// needs `UPDATE` (PostgreSQL) or `SELECT` (MySQL) on the lease tables,
    /// which `lockctl schema` grants.
    ///
    /// ```no_run
    /// # async fn pay(locker: lock_core::Locker, db: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// let guard = locker.lock("account:7").await?;
    /// let transaction = db.transaction().await?;
    /// guard.check_in(&transaction).await?;
    /// transaction
    ///     .execute("UPDATE accounts SET balance = balance + 50 WHERE id = 7", &[])
    ///     .await?;
    /// transaction.commit().await?; // only while the lease holds
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn check_in(&self, transaction: impl SqlTransaction) -> Result<(), LockError> {
        let lease = &self.lease;
        let name = lease.keys.of_kind(lease.kind);
        // The namespace (a schema, a table prefix): the stored name up to
        // its `:{`.
        let namespace = name.split_once(":{").map_or(&*name, |(ns, _)| ns);
        // The plain lock's leases have a table of their own; a queue entry
        // (token 0) holds nothing.
        let table = match lease.kind {
            crate::LockKind::Exclusive => "leases",
            _ => "holders",
        };
        let row = sealed::LeaseRow {
            namespace,
            table,
            name: &name,
            owner: lease.owner.as_str(),
        };
        // The row lock is the safety line: a takeover waits for it.
        let held = transaction.lease_row(row).await;
        let held =
            held.map_err(|err| LockError::from_store(self.key(), Operation::FencedWrite, err))?;
        if held {
            return Ok(());
        }
        lease.mark_lost(LossReason::OwnerChanged);
        Err(lease.lost_error(LossReason::OwnerChanged))
    }
}
