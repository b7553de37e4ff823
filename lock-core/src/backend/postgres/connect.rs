//! Connecting: a `postgres://` URL, a pool, the namespace's schema made or
//! checked, and the `LISTEN` connection started.

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::{Config, NoTls};

use super::errors::bounded;
use super::listen::Listener;
use super::schema::{FORMAT, Schema};
use super::{PostgresBackend, Statements, checkout, column};
use crate::store_error::{Refusal, StoreError};

/// Connections in the pool: lock statements are short.
const POOL_SIZE: usize = 4;

impl PostgresBackend {
    /// Connects to the database `url` names (`postgres://` or
    /// `postgresql://`, or a `key=value` connection string), bounding
    /// connects and statements by `timeout`, and makes the tables of
    /// `namespace` in a schema of that name if there are none (one
    /// transaction, under a lock of its own). Tables of another format
    /// version are refused ([`Refusal::UnknownFormat`]), never reused.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_core::backend::PostgresBackend;
    /// use std::time::Duration;
    ///
    /// let url = "postgres://app:secret@db.internal/app";
    /// let backend = PostgresBackend::connect(url, "lock", Duration::from_secs(2)).await?;
    /// let locker = lock_core::Locker::builder().backend(backend)?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(
        url: &str,
        namespace: &str,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        let config = Config::from_str(url)
            .map_err(|err| StoreError::refused(Refusal::InvalidUrl, InvalidUrl { source: err }))?;
        let schema = Schema::of(namespace)?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .build()
            .map_err(|err| StoreError::new(err, false))?;
        let client = checkout(&pool, timeout).await?;
        let exists = bounded(
            timeout,
            false,
            client.query_one(&schema.exists_query(), &[]),
        )
        .await?;
        let stored: Option<i32> = if column(&exists, 0)? {
            let row = bounded(
                timeout,
                false,
                client.query_opt(&schema.format_query(), &[]),
            )
            .await?;
            let version = row.as_ref().map(|row| column(row, 0)).transpose()?;
            Some(version.unwrap_or(0))
        } else {
            None
        };
        match stored {
            Some(version) if version == FORMAT as i32 => {}
            Some(version) => {
                let stored = u32::try_from(version).unwrap_or(0);
                return Err(StoreError::refused(
                    Refusal::UnknownFormat {
                        stored,
                        ours: FORMAT,
                    },
                    format!(
                        "the schema `{}` holds lock tables of format {stored}; this client \
                         reads format {FORMAT}",
                        schema.name
                    ),
                ));
            }
            None => create(&client, &schema, timeout).await?,
        }
        drop(client);
        let host = config
            .get_hosts()
            .first()
            .map(|host| match host {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_default();
        let description = format!(
            "postgres {host}/{} (schema {})",
            config.get_dbname().unwrap_or(""),
            schema.name
        );
        let listener = Listener::start(config, &schema, timeout);
        listener.started(timeout).await?;
        Ok(PostgresBackend {
            pool,
            statements: Statements::of(&schema),
            schema,
            listener,
            timeout,
            description,
        })
    }

    /// The DDL that makes `namespace`'s tables and functions (format 2),
    /// and the grants `role` then needs to lock: for databases whose
    /// schema changes are run by hand (`lockctl schema`).
    pub fn schema_sql(namespace: &str, role: &str) -> Result<(String, String), StoreError> {
        let schema = Schema::of(namespace)?;
        Ok((schema.ddl(), schema.grants(role)))
    }
}

/// Makes the schema's tables and functions in one transaction, after
/// taking a transaction lock that every Locker making them takes.
async fn create(
    client: &deadpool_postgres::Object,
    schema: &Schema,
    timeout: Duration,
) -> Result<(), StoreError> {
    let ddl = format!(
        "BEGIN; SELECT pg_advisory_xact_lock(hashtext('lock-core schema')); {} COMMIT;",
        schema.ddl()
    );
    let made = bounded(timeout, true, client.batch_execute(&ddl)).await;
    if made.is_err() {
        // A failed batch leaves its transaction open on this connection.
        let _ = client.batch_execute("ROLLBACK").await;
    }
    made
}

/// A URL that does not parse, with what to write.
#[derive(Debug, thiserror::Error)]
#[error(
    "write the PostgreSQL URL as postgres://[user[:password]@]host[:port]/database \
     (or postgresql://)"
)]
struct InvalidUrl {
    source: tokio_postgres::Error,
}
