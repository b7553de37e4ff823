//! The tables and procedures of one namespace, in the URL's database, each
//! named after the namespace, with the format version they carry. Their
//! SQL is in `sql/`: the tables, one file per procedure and one per
//! statement, each with its contract at its top; this file fills in the
//! namespace's name.
//!
//! ```text
//! `<namespace>_format`    one row: the format version (1)
//! `<namespace>_tokens`    one row: the last token drawn
//! `<namespace>_leases`    one row per lock name: the plain lock's lease (owner
//!                         value, token, expiry on the server clock, when taken,
//!                         whether a waiter found it held); for the other
//!                         kinds, the row a request locks first
//! `<namespace>_holders`   one row per holder or queue entry of the other kinds
//! `<namespace>_gone`      owner values whose release came first
//! `<namespace>_sleepers`  the wake-up connections and what they wait for
//! `<namespace>_acquire`(name, owner, ttl_ms) -> (token, remaining_ms)
//! `<namespace>_release`(name, owner) -> (live, sleepers)
//! `<namespace>_take`(name, owner, mode, size, ttl_ms)
//!                         -> (token, place, wait_ms, queued, size)
//! `<namespace>_give`(name, owner) -> (live, sleepers)
//! `<namespace>_force_release_all`(lease, fair, rw, permits, segments)
//!                         -> (removed, up_to, sleepers)
//! `<namespace>_announce`(route) -> sleepers
//! ```
//!
//! `sleepers` are the wake-up connections the caller interrupts (see
//! `sql/wake.sql`).

use crate::error::{Refusal, StoreError};

/// The format of the tables this client reads and writes.
pub(crate) const FORMAT: u32 = 1;

/// The procedure this client's DDL added last: a namespace of this format
/// without it has older procedures, which the DDL replaces.
const NEWEST: &str = "force_release_all";

/// The longest namespace: MySQL names have at most 64 characters, and the
/// longest name made of it is `<namespace>_force_release_all`.
pub(crate) const MAX_NAMESPACE_LEN: usize = 64 - "_force_release_all".len();

/// The DDL, in the order it runs: the tables, then the procedures (each
/// file says what its procedure does). Placeholders in braces are filled by
/// [`fill`].
const DDL: [&str; 12] = [
    include_str!("sql/tables.sql"),
    include_str!("sql/wait_ms.sql"),
    include_str!("sql/next_token.sql"),
    include_str!("sql/bury.sql"),
    include_str!("sql/wake.sql"),
    include_str!("sql/announce.sql"),
    include_str!("sql/sweep.sql"),
    include_str!("sql/acquire.sql"),
    include_str!("sql/release.sql"),
    include_str!("sql/take.sql"),
    include_str!("sql/give.sql"),
    include_str!("sql/force_release_all.sql"),
];

/// The grants a user needs, printed for a DBA.
const GRANTS: &str = include_str!("sql/grants.sql");

/// `template` with each `{name}` of `fills` replaced by its value.
fn fill(template: &str, fills: &[(&str, &str)]) -> String {
    fills
        .iter()
        .fold(template.to_owned(), |text, (name, value)| {
            text.replace(name, value)
        })
}

/// `template` without its comment lines (the contract at its top).
fn uncommented(template: &str) -> String {
    let lines = template.lines().filter(|line| !line.starts_with("--"));
    lines.collect::<Vec<_>>().join("\n")
}

/// The tables of one namespace, and the statements that reach them.
#[derive(Debug, Clone)]
pub(super) struct Schema {
    /// The namespace, which every table and procedure name starts with.
    pub(super) name: String,
}

/// The statements of a wake-up connection (`sql/listen.sql`).
#[derive(Debug)]
pub(super) struct ListenSql {
    pub(super) subscribe: String,
    pub(super) heard: String,
    pub(super) seen: String,
    pub(super) wait: String,
    pub(super) forget: String,
    pub(super) routes: String,
    pub(super) gone: String,
    pub(super) gone_bell: String,
    pub(super) bell: String,
    pub(super) answer: String,
}

impl Schema {
    /// The tables of `namespace` (a name of `A-Za-z0-9-_` only, which
    /// MySQL's quoted names keep as they are on every platform).
    pub(super) fn of(namespace: &str) -> Result<Self, StoreError> {
        let plain = namespace
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'));
        if namespace.is_empty() || !plain {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "the namespace `{namespace}` names MySQL tables: write it with \
                     `A-Za-z0-9-_` only"
                ),
            ));
        }
        if namespace.len() > MAX_NAMESPACE_LEN {
            return Err(StoreError::refused(
                Refusal::InvalidUrl,
                format!(
                    "the namespace `{namespace}` is longer than the {MAX_NAMESPACE_LEN} bytes \
                     a MySQL store's table names leave it; choose a shorter namespace"
                ),
            ));
        }
        Ok(Schema {
            name: namespace.to_owned(),
        })
    }

    /// `<template>` on this namespace, without comments.
    fn statement(&self, template: &str) -> String {
        let text = fill(&uncommented(template), &[("{ns}", &self.name)]);
        text.trim().to_owned()
    }

    /// Whether the namespace has its format table, and this client's
    /// newest procedure (read from `information_schema`, so that a missing
    /// table is not an error).
    pub(super) fn format_query(&self) -> String {
        format!(
            "SELECT CAST((SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name = '{ns}_format') AS SIGNED), \
             CAST((SELECT COUNT(*) FROM information_schema.routines \
                 WHERE routine_schema = DATABASE() AND routine_name = '{ns}_{NEWEST}') AS SIGNED)",
            ns = self.name
        )
    }

    /// The stored format version.
    pub(super) fn version_query(&self) -> String {
        format!(
            "SELECT CAST(version AS SIGNED) FROM `{}_format` WHERE one = 1",
            self.name
        )
    }

    /// The DDL that makes the namespace's tables and procedures (the
    /// procedures made again: `CREATE OR REPLACE`), as statements to run in
    /// turn.
    pub(super) fn ddl(&self) -> Vec<String> {
        let format = FORMAT.to_string();
        let fills = [("{ns}", self.name.as_str()), ("{format}", &format)];
        let mut statements = Vec::new();
        for file in DDL {
            let text = fill(&uncommented(file), &fills);
            if text.trim_start().starts_with("CREATE OR REPLACE PROCEDURE") {
                statements.push(text.trim().to_owned());
            } else {
                // The tables' file: one statement per `;` at a line's end.
                statements.extend(
                    text.split(";\n")
                        .map(|statement| statement.trim().trim_end_matches(';').to_owned())
                        .filter(|statement| !statement.is_empty()),
                );
            }
        }
        statements
    }

    /// The DDL as one script for a person (`lockctl schema`): the
    /// procedures between `DELIMITER` lines, as the `mysql` client needs.
    pub(super) fn script(&self) -> String {
        let mut script = String::new();
        for statement in self.ddl() {
            if statement.starts_with("CREATE OR REPLACE PROCEDURE") {
                script.push_str(&format!("DELIMITER //\n{statement}//\nDELIMITER ;\n"));
            } else {
                script.push_str(&format!("{statement};\n"));
            }
        }
        script
    }

    /// The grants `role` needs to lock in this namespace of `database`
    /// once the DDL has run (by another user, for example a DBA's
    /// migration).
    pub(super) fn grants(&self, database: &str, role: &str) -> String {
        let database = format!("`{}`", database.replace('`', "``"));
        let role = match role.split_once('@') {
            Some((user, host)) => format!("'{}'@'{}'", quote(user), quote(host)),
            None => format!("'{}'", quote(role)),
        };
        fill(
            GRANTS,
            &[
                ("{ns}", &self.name),
                ("{database}", &database),
                ("{role}", &role),
            ],
        )
    }

    /// `CALL <ns>_acquire(?, ?, ?)`.
    pub(super) fn acquire(&self) -> String {
        format!("CALL `{}_acquire`(?, ?, ?)", self.name)
    }

    /// `CALL <ns>_release(?, ?)`.
    pub(super) fn release(&self) -> String {
        format!("CALL `{}_release`(?, ?)", self.name)
    }

    /// `CALL <ns>_take(?, ?, ?, ?, ?)`.
    pub(super) fn take(&self) -> String {
        format!("CALL `{}_take`(?, ?, ?, ?, ?)", self.name)
    }

    /// `CALL <ns>_give(?, ?)`.
    pub(super) fn give(&self) -> String {
        format!("CALL `{}_give`(?, ?)", self.name)
    }

    /// `CALL <ns>_announce(?)`: wakes the waiters and observers of a lock, as
    /// a release does.
    pub(super) fn announce(&self) -> String {
        format!("CALL `{}_announce`(?)", self.name)
    }

    /// `CALL <ns>_sweep()`.
    pub(super) fn sweep(&self) -> String {
        format!("CALL `{}_sweep`()", self.name)
    }

    /// `CALL <ns>_force_release_all(?, ?, ?, ?, ?)`.
    pub(super) fn force_release(&self) -> String {
        format!("CALL `{}_force_release_all`(?, ?, ?, ?, ?)", self.name)
    }

    /// Extends a live lease (`sql/renew.sql`).
    pub(super) fn renew(&self) -> String {
        self.statement(include_str!("sql/renew.sql"))
    }

    /// Extends a live lease of another kind (`sql/renew_holder.sql`).
    pub(super) fn renew_holder(&self) -> String {
        self.statement(include_str!("sql/renew_holder.sql"))
    }

    /// The live holders and queue entries of a key (`sql/inspect.sql`).
    pub(super) fn inspect(&self) -> String {
        self.statement(include_str!("sql/inspect.sql"))
    }

    /// One page of the held locks' names (`sql/held.sql`).
    pub(super) fn held(&self) -> String {
        self.statement(include_str!("sql/held.sql"))
    }

    /// The wake-up connection's statements (`sql/listen.sql`), one per line.
    pub(super) fn listen(&self) -> ListenSql {
        let text = self.statement(include_str!("sql/listen.sql"));
        let mut lines = text.lines().map(str::to_owned);
        let mut next = || lines.next().unwrap_or_default();
        ListenSql {
            subscribe: next(),
            heard: next(),
            seen: next(),
            wait: next(),
            forget: next(),
            routes: next(),
            gone: next(),
            gone_bell: next(),
            bell: next(),
            answer: next(),
        }
    }
}

/// `text` for a single-quoted MySQL string.
fn quote(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\'', "''")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_mysql_cannot_name_is_refused_by_name() {
        let long = "n".repeat(MAX_NAMESPACE_LEN + 1);
        for bad in [long.as_str(), "a.b", "a b", ""] {
            let err = Schema::of(bad).unwrap_err();
            let told = std::error::Error::source(&err).map(ToString::to_string);
            assert!(
                told.is_some_and(|told| told.contains(&format!("`{bad}`"))),
                "{err:?}"
            );
        }
        assert!(Schema::of(&"n".repeat(MAX_NAMESPACE_LEN)).is_ok());
    }

    #[test]
    fn every_placeholder_of_the_sql_files_is_filled() {
        let schema = Schema::of("lock").unwrap();
        let listen = schema.listen();
        let statements = [
            schema.renew(),
            schema.renew_holder(),
            schema.inspect(),
            schema.held(),
            listen.subscribe,
            listen.heard,
            listen.seen,
            listen.wait.clone(),
            listen.forget,
            listen.routes,
            listen.gone.clone(),
            listen.gone_bell,
            listen.bell,
            listen.answer.clone(),
        ];
        let all = schema.ddl().into_iter().chain(statements);
        for text in all {
            assert!(!text.contains('{'), "a placeholder is left in:\n{text}");
            assert!(!text.contains("\n--"), "comments are not sent:\n{text}");
        }
        let grants = schema.grants("app", "locker@%");
        assert!(!grants.contains('{'), "a placeholder is left in:\n{grants}");
        assert!(grants.contains("TO 'locker'@'%';"), "{grants}");
        assert!(listen.gone.starts_with("DELETE"), "{}", listen.gone);
        assert!(listen.answer.starts_with("UPDATE"), "{}", listen.answer);
        // `_wake` finds a sleeping connection by its statement's start.
        assert!(
            listen.wait.starts_with("SELECT GET_LOCK("),
            "{}",
            listen.wait
        );
        let ddl = schema.ddl();
        assert!(
            ddl.iter().any(|s| s.contains("VALUES (1, 1)")),
            "the format"
        );
        let procedures = ddl.iter().filter(|s| s.contains("PROCEDURE")).count();
        assert_eq!(procedures, 11, "{ddl:#?}");
    }
}
