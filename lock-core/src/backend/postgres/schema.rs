//! The tables and functions of one namespace, in a schema of its name,
//! with the format version they carry. Their SQL is in `sql/`: the tables,
//! one file per function and one per statement, each with its contract at
//! its top; this file fills in the schema's name and sends them.
//!
//! ```text
//! "<namespace>".format   one row: the format version (2)
//! "<namespace>".tokens   the sequence tokens are drawn from
//! "<namespace>".leases   one row per held plain lock: its stored name, the
//!                        owner value, token, expiry (server clock), when it
//!                        was taken, and whether a waiter found it held
//! "<namespace>".holders  one row per holder or queue entry of the other
//!                        kinds (fair, read-write, semaphore, striped): the
//!                        kind's stored name, owner, mode, token (0 for a
//!                        queue entry), expiry, when taken, place in line,
//!                        segment, and the permits or segments of the lock
//! "<namespace>".gone     owner values whose release came before a request
//!                        with them: such a request takes nothing
//! "<namespace>".acquire(name, owner, ttl_ms) -> (token, remaining_ms)
//! "<namespace>".release(name, owner) -> live
//! "<namespace>".take(name, owner, mode, size, ttl_ms)
//!                        -> (token, place, wait_ms, queued, size)
//! "<namespace>".give(name, owner) -> live
//! "<namespace>".force_release_all(lease, names) -> (removed, up_to)
//! ```
//!
//! Releases someone may wait for are sent with `NOTIFY` on the channel
//! named after the namespace. The payload is the stored name, or the name
//! and an owner value after a space where one waiter is next (a fair
//! queue's, a waiting writer): only its subscription wakes.

use tokio_postgres::types::Type;

use crate::error::{Refusal, StoreError};

/// The format of the tables this client reads and writes.
pub(crate) const FORMAT: u32 = 2;

/// The function this client's DDL added last: a schema of this format
/// without it has older functions, which the DDL replaces (clients of the
/// same format call the functions they both know alike).
pub(crate) const NEWEST_FUNCTION: &str = "force_release_all(text, text[])";

/// How often a waiter asks again for a lock whose holder is past its expiry
/// but kept by a checked-in transaction (nothing notifies its end).
const LOCKED_POLL_MS: u64 = 100;

/// The longest name PostgreSQL keeps whole (it cuts longer ones).
pub(crate) const MAX_NAME_LEN: usize = 63;

/// The DDL, in the order it runs: the tables, then the functions (each
/// file says what its function does). Placeholders in braces are filled by
/// [`fill`].
const DDL: [&str; 11] = [
    include_str!("sql/tables.sql"),
    include_str!("sql/ms.sql"),
    include_str!("sql/wait_ms.sql"),
    include_str!("sql/bury.sql"),
    include_str!("sql/read_committed.sql"),
    include_str!("sql/sweep.sql"),
    include_str!("sql/acquire.sql"),
    include_str!("sql/release.sql"),
    include_str!("sql/take.sql"),
    include_str!("sql/give.sql"),
    include_str!("sql/force_release_all.sql"),
];

/// The grants a role needs, printed for a DBA.
const GRANTS: &str = include_str!("sql/grants.sql");

/// `template` with each `{name}` of `fills` replaced by its value.
fn fill(template: &str, fills: &[(&str, String)]) -> String {
    fills
        .iter()
        .fold(template.to_owned(), |text, (name, value)| {
            text.replace(name, value)
        })
}

/// One statement: its text and the types of its parameters, so that it can
/// be sent unprepared (behind a transaction pooler) as well as prepared.
#[derive(Debug)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) types: &'static [Type],
}

/// The schema of one namespace, and the statements that reach it.
#[derive(Debug, Clone)]
pub(super) struct Schema {
    /// The namespace, also the schema's name and the channel's.
    pub(super) name: String,
}

impl Schema {
    /// The schema of `namespace` (a name of `A-Za-z0-9-_.:/`, so quoting
    /// it needs no escape).
    pub(super) fn of(namespace: &str) -> Result<Self, StoreError> {
        let plain = namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':' | b'/'));
        if namespace.is_empty() || !plain {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "the namespace `{namespace}` names a PostgreSQL schema: write it with \
                     `A-Za-z0-9-_.:/` only"
                ),
            ));
        }
        if namespace.len() > MAX_NAME_LEN {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "the namespace `{namespace}` is longer than the {MAX_NAME_LEN} bytes of a \
                     PostgreSQL schema name; choose a shorter namespace"
                ),
            ));
        }
        Ok(Schema {
            name: namespace.to_owned(),
        })
    }

    /// The schema's name as SQL writes it.
    pub(super) fn quoted(&self) -> String {
        format!("\"{}\"", self.name)
    }

    /// Whether the namespace has tables (its format table).
    pub(super) fn exists_query(&self) -> String {
        format!("SELECT to_regclass('{}.format') IS NOT NULL", self.quoted())
    }

    /// The format of the namespace's tables, and whether it has this
    /// client's newest function.
    pub(super) fn format_query(&self) -> String {
        format!(
            "SELECT version, to_regprocedure('{s}.{NEWEST_FUNCTION}') IS NOT NULL FROM {s}.format",
            s = self.quoted()
        )
    }

    /// The DDL that makes the namespace's tables and functions, run in one
    /// transaction that first takes a lock of its own, so that Lockers
    /// connecting at once do not race each other's `CREATE`s.
    pub(super) fn ddl(&self) -> String {
        let format = FORMAT.to_string();
        let poll = LOCKED_POLL_MS.to_string();
        let fills = [
            ("{schema}", self.quoted()),
            ("{channel}", self.name.clone()),
            ("{format}", format),
            ("{locked_poll_ms}", poll),
        ];
        DDL.iter()
            .map(|sql| fill(sql, &fills))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The grants a role needs to lock in this namespace once the DDL has
    /// run (by another role, for example a DBA's migration).
    pub(super) fn grants(&self, role: &str) -> String {
        let role = format!("\"{}\"", role.replace('"', "\"\""));
        fill(GRANTS, &[("{schema}", self.quoted()), ("{role}", role)])
    }

    /// A statement of `template` on this schema, without its comment lines
    /// (sent with every call behind a pooler).
    fn statement(&self, template: &str, types: &'static [Type]) -> Sql {
        let lines = template.lines().filter(|line| !line.starts_with("--"));
        let text = lines.collect::<Vec<_>>().join("\n");
        Sql {
            text: fill(&text, &[("{schema}", self.quoted())]),
            types,
        }
    }

    /// `SELECT * FROM <schema>.acquire($1, $2, $3)`.
    pub(super) fn acquire(&self) -> Sql {
        let text = format!(
            "SELECT token, remaining_ms FROM {}.acquire($1, $2, $3)",
            self.quoted()
        );
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT, Type::INT8],
        }
    }

    /// `SELECT * FROM <schema>.take($1, $2, $3, $4, $5)`.
    pub(super) fn take(&self) -> Sql {
        let text = format!("SELECT * FROM {}.take($1, $2, $3, $4, $5)", self.quoted());
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT, Type::TEXT, Type::INT4, Type::INT8],
        }
    }

    /// `SELECT <schema>.give($1, $2)`.
    pub(super) fn give(&self) -> Sql {
        let text = format!("SELECT {}.give($1, $2)", self.quoted());
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT],
        }
    }

    /// Extends a live lease (`sql/renew.sql`).
    pub(super) fn renew(&self) -> Sql {
        self.statement(
            include_str!("sql/renew.sql"),
            &[Type::TEXT, Type::TEXT, Type::INT8],
        )
    }

    /// Extends a live lease of another kind (`sql/renew_holder.sql`).
    pub(super) fn renew_holder(&self) -> Sql {
        self.statement(
            include_str!("sql/renew_holder.sql"),
            &[Type::TEXT, Type::TEXT, Type::INT8],
        )
    }

    /// `SELECT <schema>.release($1, $2)`.
    pub(super) fn release(&self) -> Sql {
        let text = format!("SELECT {}.release($1, $2)", self.quoted());
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT],
        }
    }

    /// Wakes the waiters and observers of the lock `$1`, as a release
    /// does.
    pub(super) fn announce(&self) -> Sql {
        let text = format!("SELECT pg_notify('{}', $1)", self.name);
        Sql {
            text,
            types: &[Type::TEXT],
        }
    }

    /// The live holders and queue entries of a key (`sql/inspect.sql`).
    pub(super) fn inspect(&self) -> Sql {
        self.statement(
            include_str!("sql/inspect.sql"),
            &[Type::TEXT, Type::TEXT_ARRAY],
        )
    }

    /// One page of the held locks' names (`sql/held.sql`).
    pub(super) fn held(&self) -> Sql {
        self.statement(
            include_str!("sql/held.sql"),
            &[Type::TEXT, Type::INT8, Type::TEXT],
        )
    }

    /// `SELECT <schema>.sweep()`.
    pub(super) fn sweep(&self) -> Sql {
        let text = format!("SELECT {}.sweep()", self.quoted());
        Sql { text, types: &[] }
    }

    /// `SELECT * FROM <schema>.force_release_all($1, $2)`.
    pub(super) fn force_release(&self) -> Sql {
        let text = format!("SELECT * FROM {}.force_release_all($1, $2)", self.quoted());
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT_ARRAY],
        }
    }

    /// `LISTEN` on the namespace's channel.
    pub(super) fn listen(&self) -> String {
        format!("LISTEN {}", self.quoted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_longer_than_a_postgres_name_is_refused_by_name() {
        let long = "n".repeat(64);
        let err = Schema::of(&long).unwrap_err();
        let told = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            told.is_some_and(|told| told.contains("63 bytes")),
            "{err:?}"
        );
        assert_eq!(Schema::of("lock").unwrap().quoted(), "\"lock\"");
    }

    #[test]
    fn every_placeholder_of_the_sql_files_is_filled() {
        let schema = Schema::of("lock").unwrap();
        let statements = [
            schema.renew(),
            schema.renew_holder(),
            schema.inspect(),
            schema.held(),
        ];
        let texts = [schema.ddl(), schema.grants("locker")];
        let all = texts
            .into_iter()
            .chain(statements.into_iter().map(|sql| sql.text));
        for text in all {
            let left = text.split('{').skip(1).find(|rest| {
                let name = rest.split('}').next().unwrap_or_default();
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            });
            assert!(left.is_none(), "a placeholder is left in:\n{text}");
        }
        assert!(!schema.ddl().contains('{'), "no brace is left in the DDL");
        assert!(schema.ddl().contains("VALUES (2)"), "the format version");
        assert!(!schema.renew().text.contains("--"), "comments are not sent");
    }
}
