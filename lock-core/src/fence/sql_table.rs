//! What the SQL fences ([`PgFence`](super::postgres::PgFence),
//! [`MySqlFence`](super::mysql::MySqlFence)) share: the names they write
//! into their statements, checked, and the token as a `BIGINT` value.

use crate::error::LockError;
#[cfg(any(feature = "sqlx", feature = "mysql"))]
use crate::error::{Applied, StoreError};
use crate::token::FencingToken;

/// `name` if it is a plain identifier, optionally qualified by one other
/// (`schema.table`), each part at most `longest` bytes: it is written into
/// the SQL. `what` names the argument in the refusal.
pub(super) fn identifier(
    what: &'static str,
    name: &str,
    longest: usize,
) -> Result<String, LockError> {
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
