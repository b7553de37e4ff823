//! What the SQL fences ([`PgFence`](super::postgres::PgFence),
//! [`MySqlFence`](super::mysql::MySqlFence)) share: the names they write
//! into their statements, checked, the token as a `BIGINT` value, and what
//! an update that wrote no row means.

use super::stale;
use crate::error::LockError;
#[cfg(any(feature = "sqlx", feature = "mysql"))]
use crate::error::{Applied, StoreError};
use crate::token::FencingToken;

/// A fenced table's names, checked, and the statements written with them.
#[derive(Debug, Clone)]
pub(super) struct FencedTable {
    table: String,
    key_column: String,
    fence_column: String,
}

impl FencedTable {
    /// `table`, its rows found by `key_column`, tokens kept in
    /// `fence_column`: each a plain identifier of at most `longest` bytes.
    pub(super) fn new(
        table: &str,
        key_column: &str,
        fence_column: &str,
        longest: usize,
    ) -> Result<Self, LockError> {
        Ok(FencedTable {
            table: identifier("table", table, longest)?,
            key_column: identifier("key column", key_column, longest)?,
            fence_column: identifier("fence column", fence_column, longest)?,
        })
    }

    /// The fenced update of `set`, with the placeholders `token` and `key`.
    pub(super) fn update(&self, set: &str, token: &str, key: &str) -> String {
        format!(
            "UPDATE {table} SET {set}, {fence} = {token} WHERE {key_col} = {key} AND {fence} <= {token}",
            table = self.table,
            fence = self.fence_column,
            key_col = self.key_column,
        )
    }

    /// The token on the row of placeholder `key`, read after an update
    /// wrote no row: none (no such row) or a newer one.
    pub(super) fn newest(&self, key: &str) -> String {
        format!(
            "SELECT {fence} FROM {table} WHERE {key_col} = {key}",
            fence = self.fence_column,
            table = self.table,
            key_col = self.key_column,
        )
    }

    /// The resource a refusal names: the table and the row's key.
    pub(super) fn resource(&self, key: &dyn std::fmt::Debug) -> String {
        format!("{}[{key:?}]", self.table)
    }
}

/// What an update with `token` that wrote no row of `resource` means, from
/// the token on the row: no such row (0 rows), or a newer token
/// ([`LockError::StaleToken`]).
pub(super) fn unwritten(
    resource: &str,
    token: FencingToken,
    newest: Option<i64>,
) -> Result<u64, LockError> {
    match newest {
        None => Ok(0),
        Some(newest) => Err(stale(
            resource,
            token,
            FencingToken::new(newest.max(0) as u64),
        )),
    }
}

/// `name` if it is a plain identifier, optionally qualified by one other
/// (`schema.table`), each part at most `longest` bytes: it is written into
/// the SQL. `what` names the argument in the refusal.
fn identifier(what: &'static str, name: &str, longest: usize) -> Result<String, LockError> {
    let mut parts = name.split('.');
    let plain = parts.clone().count() <= 2
        && parts.all(|part| {
            let mut chars = part.chars();
            part.len() <= longest
                && matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
                && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        });
    if plain {
        Ok(name.to_owned())
    } else {
        Err(LockError::invalid_config(
            what,
            format!(
                "`{name}` is not a plain SQL identifier (`[A-Za-z_][A-Za-z0-9_]*` of at most {longest} bytes, optionally qualified as `schema.table`)"
            ),
        ))
    }
}

/// `token` as the value of a `BIGINT` column.
pub(super) fn token_param(token: FencingToken) -> Result<i64, LockError> {
    i64::try_from(token.get()).map_err(|_| {
        LockError::invalid_config(
            "fencing token",
            format!("{token} does not fit a BIGINT column"),
        )
    })
}

/// A sqlx error as the store's: a broken connection may have run the
/// statement.
#[cfg(any(feature = "sqlx", feature = "mysql"))]
pub(super) fn sqlx_error(err: sqlx::Error) -> StoreError {
    let unknown = matches!(err, sqlx::Error::Io(_));
    StoreError::transient(err, Applied::maybe_if(unknown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_plain_and_short() {
        assert!(identifier("table", "billing.accounts", 63).is_ok());
        assert!(identifier("table", "_accounts2", 63).is_ok());
        for bad in [
            "",
            "a.b.c",
            "2accounts",
            "accounts; DROP TABLE x",
            "a-b",
            "a.",
        ] {
            let err = identifier("table", bad, 63).unwrap_err();
            assert!(err.to_string().contains("table"), "{bad}: {err}");
        }
        assert!(identifier("table", &"a".repeat(64), 64).is_ok());
        assert!(identifier("table", &"a".repeat(64), 63).is_err());
    }

    #[test]
    fn tokens_beyond_bigint_are_refused() {
        assert_eq!(token_param(FencingToken::new(7)).unwrap(), 7);
        assert!(token_param(FencingToken::new(u64::MAX)).is_err());
    }
}
