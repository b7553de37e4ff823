//! Connecting: a `postgres://` URL and the settings lock-core reads from
//! it, a pool, the namespace's schema made or checked, and the `LISTEN`
//! connection started (or the poll that stands in for it).

use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::{Config, NoTls};

use super::errors::bounded;
use super::listen::Listener;
use super::poll::Poll;
use super::schema::{FORMAT, Schema};
use super::transport::Transport;
use super::{Connections, PostgresBackend, Statements, Wakeups, checkout, column};
use crate::error::{Refusal, StoreError};

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
    /// Three settings of the URL's query are lock-core's own:
    /// - `create_schema=false`: never make the tables (a DBA ran what
    ///   `lockctl schema` prints); a schema without them is refused
    ///   ([`Refusal::InvalidUrl`], saying so).
    /// - `pgbouncer=true`: the URL names a transaction-pooling proxy, so
    ///   statements are sent unprepared and without startup options (no
    ///   server-side `statement_timeout`; the client's timeout still holds).
    /// - `listen_url=<URL, percent-encoded>`: a direct connection for
    ///   `LISTEN`; behind a pooler without it, waiters ask again every
    ///   [`POLL_INTERVAL`](Self::POLL_INTERVAL).
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
        Self::connect_with(url, namespace, timeout, None).await
    }

    /// [`connect`](Self::connect), trusting the PEM certificates `roots`
    /// (feature `tls`) for a URL with `sslmode=require`, instead of the
    /// system's roots.
    #[cfg(feature = "tls")]
    pub async fn connect_tls(
        url: &str,
        namespace: &str,
        timeout: Duration,
        roots: &[u8],
    ) -> Result<Self, StoreError> {
        Self::connect_with(url, namespace, timeout, Some(roots)).await
    }

    async fn connect_with(
        url: &str,
        namespace: &str,
        timeout: Duration,
        roots: Option<&[u8]>,
    ) -> Result<Self, StoreError> {
        let settings = Settings::of(url, timeout)?;
        let schema = Schema::of(namespace)?;
        let transport = Transport::of(&settings.config, roots)?;
        let pool = pool(&settings.config, transport.clone(), timeout)?;
        let client = checkout(&pool, timeout).await?;
        match stored_format(&client, &schema, timeout).await? {
            Some((version, true)) if version == FORMAT as i32 => {}
            // The same tables with older functions: the DDL replaces them
            // (an older client calls the new ones alike).
            Some((version, false)) if version == FORMAT as i32 => {
                if settings.create_schema {
                    create(&client, &schema, timeout).await?;
                } else {
                    tracing::warn!(
                        schema = %schema.name,
                        "the schema's lock functions are older than this client's: run what \
                         `lockctl schema` prints (until then a force-release fails)"
                    );
                }
            }
            Some((version, _)) => return Err(other_format(&schema, version)),
            None if settings.create_schema => create(&client, &schema, timeout).await?,
            None => {
                return Err(StoreError::refused(
                    Refusal::InvalidUrl,
                    format!(
                        "the schema `{}` holds no lock tables and the URL says \
                         create_schema=false: run what `lockctl schema` prints, or let the \
                         Locker make them",
                        schema.name
                    ),
                ));
            }
        }
        drop(client);
        let description = description(&settings.config, &schema);
        let wakeups = match (&settings.listen, settings.pooled) {
            (Some(direct), _) => {
                let transport = Transport::of(direct, roots)?;
                let listener = Listener::start(direct.clone(), transport, &schema, timeout);
                Wakeups::Notified(listener)
            }
            (None, false) => {
                let listener = Listener::start(settings.config, transport, &schema, timeout);
                Wakeups::Notified(listener)
            }
            (None, true) => Wakeups::Polled(Poll::start()),
        };
        if let Wakeups::Notified(listener) = &wakeups {
            listener.started(timeout).await?;
        }
        let connections = Connections {
            pool,
            timeout,
            pooled: settings.pooled,
        };
        let statements = Statements::of(&schema);
        let sweep = {
            let (connections, sql) = (connections.clone(), std::sync::Arc::new(schema.sweep()));
            crate::backend::sweep::start("PostgreSQL", move || {
                let (connections, sql) = (connections.clone(), sql.clone());
                async move { connections.query(&sql, &[], true).await.map(drop) }
            })
        };
        Ok(PostgresBackend {
            connections,
            statements,
            schema,
            wakeups,
            description,
            _sweep: sweep,
        })
    }

    /// The DDL that makes `namespace`'s tables and functions (format 2; on
    /// a schema with older functions, it replaces them),
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
        let _ = tokio::time::timeout(timeout, client.batch_execute("ROLLBACK")).await;
    }
    made
}

/// What a URL sets: the connection, and lock-core's own settings from its
/// query (see [`PostgresBackend::connect`]).
struct Settings {
    config: Config,
    pooled: bool,
    listen: Option<Config>,
    create_schema: bool,
}

impl Settings {
    /// The settings of `url`, its connections kept alive (a dead peer is
    /// found within about a minute) and, unless pooled, each statement
    /// bounded by `timeout` at the server and run read committed.
    fn of(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let (mut pooled, mut listen, mut create_schema) = (false, None, true);
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            match pair.split_once('=') {
                Some(("pgbouncer", value)) => pooled = flag("pgbouncer", value)?,
                Some(("create_schema", value)) => create_schema = flag("create_schema", value)?,
                Some(("listen_url", value)) => {
                    let direct = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
                    listen = Some(parse(&direct, "listen_url")?);
                }
                _ => kept.push(pair),
            }
        }
        let url = match kept.is_empty() {
            true => base.to_owned(),
            false => format!("{base}?{}", kept.join("&")),
        };
        let mut config = parse(&url, "URL")?;
        let mut configs: Vec<&mut Config> = vec![&mut config];
        configs.extend(listen.as_mut());
        for config in configs {
            config
                .keepalives(true)
                .keepalives_idle(Duration::from_secs(30))
                .keepalives_interval(Duration::from_secs(5))
                .keepalives_retries(5);
        }
        if !pooled {
            let ms = timeout.as_millis().max(1);
            let ours = format!(
                "-c statement_timeout={ms} -c default_transaction_isolation=read\\ committed"
            );
            let options = match config.get_options() {
                Some(theirs) => format!("{theirs} {ours}"),
                None => ours,
            };
            config.options(options);
        }
        Ok(Settings {
            config,
            pooled,
            listen,
            create_schema,
        })
    }
}

/// `text` as a connection's settings; `what` names it in the error.
fn parse(text: &str, what: &'static str) -> Result<Config, StoreError> {
    Config::from_str(text)
        .map_err(|err| StoreError::refused(Refusal::InvalidUrl, InvalidUrl { what, source: err }))
}

/// A `true`/`false` setting `name` of the URL.
fn flag(name: &str, value: &str) -> Result<bool, StoreError> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(StoreError::refused(
            Refusal::InvalidUrl,
            format!("write `{name}=true` or `{name}=false` in the PostgreSQL URL, not `{value}`"),
        )),
    }
}

/// A URL that does not parse, with what to write.
#[derive(Debug, thiserror::Error)]
#[error(
    "write the PostgreSQL {what} as postgres://[user[:password]@]host[:port]/database \
     (or postgresql://)"
)]
struct InvalidUrl {
    what: &'static str,
    source: tokio_postgres::Error,
}

/// The pool of the lock's own connections to the server `config` names.
fn pool(config: &Config, transport: Transport, timeout: Duration) -> Result<Pool, StoreError> {
    let recycling = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match transport {
        Transport::Plain => Manager::from_config(config.clone(), NoTls, recycling),
        #[cfg(feature = "tls")]
        Transport::Tls(tls) => Manager::from_config(config.clone(), tls, recycling),
    };
    Pool::builder(manager)
        .max_size(POOL_SIZE)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .build()
        .map_err(StoreError::not_applied)
}

/// The format version of the namespace's tables and whether they have this
/// client's newest function, or `None` where there are no tables.
async fn stored_format(
    client: &deadpool_postgres::Object,
    schema: &Schema,
    timeout: Duration,
) -> Result<Option<(i32, bool)>, StoreError> {
    // Unprepared (`query_typed`): behind a transaction pooler a named
    // statement may be gone by the next transaction.
    let query = schema.exists_query();
    let exists = bounded(timeout, false, client.query_typed(&query, &[])).await?;
    let exists = exists.first().map(|row| column(row, 0)).transpose()?;
    if exists != Some(true) {
        return Ok(None);
    }
    let query = schema.format_query();
    let rows = bounded(timeout, false, client.query_typed(&query, &[])).await?;
    let row = rows.first();
    let version = row.map(|row| column(row, 0)).transpose()?;
    let newest = row.map(|row| column(row, 1)).transpose()?;
    Ok(Some((version.unwrap_or(0), newest.unwrap_or(false))))
}

/// The refusal of tables of another format `version`.
fn other_format(schema: &Schema, version: i32) -> StoreError {
    let stored = u32::try_from(version).unwrap_or(0);
    StoreError::refused(
        Refusal::UnknownFormat {
            stored,
            ours: FORMAT,
        },
        format!(
            "the schema `{}` holds lock tables of format {stored}; this client reads format \
             {FORMAT}",
            schema.name
        ),
    )
}

/// `postgres <host>/<database> (schema <namespace>)`, for logs.
fn description(config: &Config, schema: &Schema) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|host| match host {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let database = config.get_dbname().unwrap_or("");
    format!("postgres {host}/{database} (schema {})", schema.name)
}
