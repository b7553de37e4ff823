//! Connecting: a `mysql://` URL and the setting lock-core reads from it, a
//! pool, the namespace's tables made or checked, and the wake-up connection
//! started.

use std::str::FromStr;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlPoolOptions};
use sqlx::{ConnectOptions, Connection, Executor, Row};

use super::errors::{NO_SUCH_TABLE, bounded, number_of, store_error};
use super::listen::Listener;
use super::schema::{FORMAT, Schema};
use super::{Connections, MysqlBackend, Statements};
use crate::error::{Refusal, StoreError};

/// Connections in the pool: lock statements are short.
const POOL_SIZE: u32 = 4;

impl MysqlBackend {
    /// Connects to the database `url` names
    /// (`mysql://[user[:password]@]host[:port]/database`, with sqlx's
    /// settings such as `ssl-mode`), bounding connects and statements by
    /// `timeout`, and makes the tables and procedures of `namespace` in that
    /// database if there are none (under a named lock, so that Lockers
    /// starting at once do not race). Tables of another format version are
    /// refused ([`Refusal::UnknownFormat`]), never reused.
    ///
    /// One setting of the URL's query is lock-core's own:
    /// `create_schema=false`: never make the tables (a DBA ran what
    /// `lockctl schema` prints); a database without them is refused
    /// ([`Refusal::InvalidUrl`], saying so).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_core::backend::MysqlBackend;
    /// use std::time::Duration;
    ///
    /// let url = "mysql://app:secret@db.internal/app";
    /// let backend = MysqlBackend::connect(url, "lock", Duration::from_secs(2)).await?;
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
        let settings = Settings::of(url)?;
        let schema = Schema::of(namespace)?;
        let options = settings.options;
        let mut connection = bounded(timeout, false, options.connect()).await?;
        let prepared = prepare(&mut connection, &schema, settings.create_schema, timeout).await;
        let _ = tokio::time::timeout(timeout, connection.close()).await;
        prepared?;
        let pool = pool(options.clone(), timeout);
        let listener = Listener::start(options.clone(), schema.listen(), timeout);
        listener.started(timeout).await?;
        let connections = Connections { pool, timeout };
        let statements = Statements::of(&schema);
        let sweep = {
            let (connections, sql) = (connections.clone(), std::sync::Arc::new(schema.sweep()));
            crate::backend::sweep::start("MySQL", move || {
                let (connections, sql) = (connections.clone(), sql.clone());
                async move { connections.rows(|| sqlx::query(&sql), true).await.map(drop) }
            })
        };
        Ok(MysqlBackend {
            connections,
            statements,
            description: description(&options, &schema),
            schema,
            listener,
            _sweep: sweep,
        })
    }

    /// The DDL that makes `namespace`'s tables and procedures (format 1;
    /// the procedures are made again where they exist), as a script for the
    /// `mysql` client, and the grants the user `role` (`name` or
    /// `name@host`) then needs to lock in `database`: for databases whose
    /// schema changes are run by hand (`lockctl schema`).
    ///
    /// ```
    /// use lock_core::backend::MysqlBackend;
    ///
    /// let (ddl, grants) = MysqlBackend::schema_sql("lock", "app", "locker")?;
    /// assert!(ddl.contains("CREATE TABLE IF NOT EXISTS `lock_leases`"));
    /// assert!(ddl.contains("DELIMITER //")); // for the `mysql` client
    /// assert!(grants.contains("ON `app`.`lock_leases` TO 'locker';"));
    /// # Ok::<(), lock_core::StoreError>(())
    /// ```
    pub fn schema_sql(
        namespace: &str,
        database: &str,
        role: &str,
    ) -> Result<(String, String), StoreError> {
        let schema = Schema::of(namespace)?;
        Ok((schema.script(), schema.grants(database, role)))
    }
}

/// Makes or checks the namespace's tables on `connection`.
async fn prepare(
    connection: &mut MySqlConnection,
    schema: &Schema,
    create_schema: bool,
    timeout: Duration,
) -> Result<(), StoreError> {
    match stored_format(connection, schema, timeout).await? {
        Some((version, true)) if version == FORMAT => Ok(()),
        // No format row (0): tables made up to where another Locker's DDL
        // is, or was cut off; made, under the DDL's lock, or refused.
        Some((version, _)) if version != FORMAT && version != 0 => {
            Err(other_format(schema, version))
        }
        _ if create_schema => create(connection, schema, timeout).await,
        Some((version, _)) if version == FORMAT => {
            tracing::warn!(
                namespace = %schema.name,
                "the namespace's lock procedures are older than this client's: run what \
                 `lockctl schema` prints"
            );
            Ok(())
        }
        // A user without the grants is shown no tables either: asked for
        // by name, the server tells a denial from a table that is missing.
        Some(_) | None => match denied(connection, schema, timeout).await {
            Some(denial) => Err(denial),
            None => Err(StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "the database holds no lock tables of the namespace `{}` and the URL says \
                 create_schema=false: run what `lockctl schema` prints, or let the Locker \
                 make them",
                    schema.name
                ),
            )),
        },
    }
}

/// The server's refusal to read the namespace's format table, where it
/// refuses it for want of a grant (`PermissionDenied`, naming the fix).
async fn denied(
    connection: &mut MySqlConnection,
    schema: &Schema,
    timeout: Duration,
) -> Option<StoreError> {
    let query = schema.version_query();
    let read = sqlx::query(&query).fetch_optional(&mut *connection);
    match tokio::time::timeout(timeout, read).await {
        Ok(Err(err)) if number_of(&err) != Some(NO_SUCH_TABLE) => Some(store_error(err, false)),
        _ => None,
    }
}

/// Makes the tables and procedures, under a named lock every Locker
/// making them takes (DDL commits as it goes, so no transaction holds
/// them back).
async fn create(
    connection: &mut MySqlConnection,
    schema: &Schema,
    timeout: Duration,
) -> Result<(), StoreError> {
    let seconds = timeout.as_secs().max(1);
    let lock = sqlx::query("SELECT GET_LOCK(CONCAT('lock-core schema ', DATABASE()), ?)")
        .bind(seconds)
        .execute(&mut *connection);
    bounded(timeout * 2, false, lock).await?;
    for statement in schema.ddl() {
        bounded(timeout, true, connection.execute(statement.as_str())).await?;
    }
    let unlock = sqlx::query("SELECT RELEASE_LOCK(CONCAT('lock-core schema ', DATABASE()))")
        .execute(&mut *connection);
    bounded(timeout, false, unlock).await.map(drop)
}

/// What a URL sets: the connection, and lock-core's own setting from its
/// query (see [`MysqlBackend::connect`]).
struct Settings {
    options: MySqlConnectOptions,
    create_schema: bool,
}

impl Settings {
    fn of(url: &str) -> Result<Self, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut create_schema = true;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("create_schema", "true")) => create_schema = true,
                Some(("create_schema", "false")) => create_schema = false,
                Some(("create_schema", value)) => {
                    return Err(StoreError::refused(
                        Refusal::InvalidUrl,
                        format!(
                            "write `create_schema=true` or `create_schema=false` in the MySQL \
                             URL, not `{value}`"
                        ),
                    ));
                }
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
        let options = MySqlConnectOptions::from_str(&url)
            .map_err(|err| StoreError::refused(Refusal::InvalidUrl, InvalidUrl { source: err }))?;
        if options.get_database().is_none_or(str::is_empty) {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                "the MySQL URL names no database: write mysql://user:password@host/database",
            ));
        }
        Ok(Settings {
            options,
            create_schema,
        })
    }
}

/// A URL that does not parse, with what to write.
#[derive(Debug, thiserror::Error)]
#[error("write the MySQL URL as mysql://[user[:password]@]host[:port]/database")]
struct InvalidUrl {
    source: sqlx::Error,
}

/// The pool of the lock's own connections.
fn pool(options: MySqlConnectOptions, timeout: Duration) -> sqlx::MySqlPool {
    MySqlPoolOptions::new()
        .max_connections(POOL_SIZE)
        .acquire_timeout(timeout)
        .after_connect(|connection, _| Box::pin(session(connection)))
        .connect_lazy_with(options)
}

/// Sets up a connection of the lock's: it reads committed (no gap locks,
/// which would make statements on one table wait for each other), and
/// gives up a row lock wait after a second, the shortest the server takes:
/// the lock's own statements hold a row for milliseconds, so a longer wait
/// is a checked-in transaction's, which a request for the lock answers as
/// held (and asks again) before the client's timeout ends it.
pub(super) async fn session(connection: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    connection
        .execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    connection
        .execute("SET SESSION innodb_lock_wait_timeout = 1")
        .await
        .map(drop)
}

/// The format version of the namespace's tables and whether they have this
/// client's newest procedure, or `None` where there are no tables.
async fn stored_format(
    connection: &mut MySqlConnection,
    schema: &Schema,
    timeout: Duration,
) -> Result<Option<(u32, bool)>, StoreError> {
    let query = schema.format_query();
    let row = bounded(
        timeout,
        false,
        sqlx::query(&query).fetch_one(&mut *connection),
    )
    .await?;
    let (tables, newest): (i64, i64) = (column(&row, 0)?, column(&row, 1)?);
    if tables == 0 {
        return Ok(None);
    }
    let query = schema.version_query();
    let row = bounded(
        timeout,
        false,
        sqlx::query(&query).fetch_optional(&mut *connection),
    )
    .await?;
    let version = match row {
        Some(row) => column::<i64>(&row, 0)?,
        None => 0,
    };
    Ok(Some((u32::try_from(version).unwrap_or(0), newest > 0)))
}

fn column<'r, T>(row: &'r sqlx::mysql::MySqlRow, index: usize) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::MySql> + sqlx::Type<sqlx::MySql>,
{
    row.try_get(index).map_err(|err| store_error(err, false))
}

/// The refusal of tables of another format `stored`.
fn other_format(schema: &Schema, stored: u32) -> StoreError {
    StoreError::refused(
        Refusal::UnknownFormat {
            stored,
            ours: FORMAT,
        },
        format!(
            "the namespace `{}` holds lock tables of format {stored}; this client reads format \
             {FORMAT}",
            schema.name
        ),
    )
}

/// `mysql <host>:<port>/<database> (namespace <namespace>)`, for logs.
fn description(options: &MySqlConnectOptions, schema: &Schema) -> String {
    format!(
        "mysql {}:{}/{} (namespace {})",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or(""),
        schema.name
    )
}
