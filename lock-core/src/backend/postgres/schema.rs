//! The tables and functions of one namespace, in a schema of its name,
//! with the format version they carry.
//!
//! ```text
//! "<namespace>".format   one row: the format version (1)
//! "<namespace>".tokens   the sequence tokens are drawn from
//! "<namespace>".leases   one row per held plain lock: its stored name, the
//!                        owner value, token, expiry (server clock), when it
//!                        was taken, and whether a waiter found it held
//! "<namespace>".acquire(name, owner, ttl_ms) -> (token, remaining_ms)
//! "<namespace>".release(name, owner) -> live
//! ```
//!
//! Releases of a lease someone waited for are sent with `NOTIFY` on the
//! channel named after the namespace, the stored name as payload.

use crate::store_error::{Refusal, StoreError};

/// The format of the tables this client reads and writes.
pub(crate) const FORMAT: u32 = 1;

/// The longest name PostgreSQL keeps whole (it cuts longer ones).
pub(crate) const MAX_NAME_LEN: usize = 63;

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

    /// The format of the namespace's tables.
    pub(super) fn format_query(&self) -> String {
        format!("SELECT version FROM {}.format", self.quoted())
    }

    /// The DDL that makes the namespace's tables and functions, run in one
    /// transaction that first takes a lock of its own, so that Lockers
    /// connecting at once do not race each other's `CREATE`s.
    pub(super) fn ddl(&self) -> String {
        let s = self.quoted();
        let channel = &self.name;
        format!(
            r#"CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.format (
    version integer NOT NULL,
    one boolean PRIMARY KEY DEFAULT true CHECK (one)
);
INSERT INTO {s}.format (version) VALUES ({FORMAT}) ON CONFLICT DO NOTHING;
CREATE SEQUENCE IF NOT EXISTS {s}.tokens;
CREATE TABLE IF NOT EXISTS {s}.leases (
    name text PRIMARY KEY,
    owner text NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    taken timestamptz NOT NULL,
    waited boolean NOT NULL DEFAULT false
);
-- Takes the lease of `p_name` for `p_owner`: a new one (a token drawn
-- after the row is locked, so tokens rise in grant order), its own again
-- (same token, ttl from now), or none: `remaining_ms` of the holder's.
CREATE OR REPLACE FUNCTION {s}.acquire(p_name text, p_owner text, p_ttl_ms bigint,
    OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_expires timestamptz;
    v_waited boolean;
BEGIN
    LOOP
        -- The row lock a checked-in transaction's FOR KEY SHARE holds off:
        -- no takeover while one is open. Renewals need only a weaker lock.
        PERFORM 1 FROM {s}.leases l WHERE l.name = p_name FOR UPDATE;
        v_now := clock_timestamp();
        UPDATE {s}.leases l
           SET token = CASE WHEN l.owner = p_owner AND l.expires > v_now
                            THEN l.token ELSE nextval('{s}.tokens') END,
               taken = CASE WHEN l.owner = p_owner AND l.expires > v_now
                            THEN l.taken ELSE v_now END,
               waited = l.waited AND l.owner = p_owner AND l.expires > v_now,
               owner = p_owner,
               expires = v_now + p_ttl_ms * interval '1 millisecond'
         WHERE l.name = p_name AND (l.expires <= v_now OR l.owner = p_owner)
        RETURNING l.token INTO token;
        IF FOUND THEN
            RETURN;
        END IF;
        SELECT l.expires, l.waited INTO v_expires, v_waited
          FROM {s}.leases l WHERE l.name = p_name;
        IF FOUND THEN
            IF NOT v_waited THEN
                UPDATE {s}.leases l SET waited = true WHERE l.name = p_name;
            END IF;
            remaining_ms := greatest(0, ceil(extract(epoch FROM v_expires - v_now) * 1000));
            RETURN;
        END IF;
        BEGIN
            INSERT INTO {s}.leases (name, owner, token, expires, taken)
            VALUES (p_name, p_owner, 0, v_now + p_ttl_ms * interval '1 millisecond', v_now);
        EXCEPTION WHEN unique_violation THEN
            -- Taken meanwhile: look again.
            CONTINUE;
        END;
        -- The token is drawn once the row is ours: a grant that committed
        -- before drew its token before, so tokens rise in grant order.
        UPDATE {s}.leases l SET token = nextval('{s}.tokens')
         WHERE l.name = p_name RETURNING l.token INTO token;
        RETURN;
    END LOOP;
END
$$;
-- Ends `p_owner`'s lease of `p_name`; tells waiters if any found it held.
-- True if the lease was live.
CREATE OR REPLACE FUNCTION {s}.release(p_name text, p_owner text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_live boolean;
    v_waited boolean;
BEGIN
    DELETE FROM {s}.leases l WHERE l.name = p_name AND l.owner = p_owner
    RETURNING l.expires > clock_timestamp(), l.waited INTO v_live, v_waited;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF v_waited THEN
        PERFORM pg_notify('{channel}', p_name);
    END IF;
    RETURN v_live;
END
$$;
"#
        )
    }

    /// The grants a role needs to lock in this namespace once the DDL has
    /// run (by another role, for example a DBA's migration).
    pub(super) fn grants(&self, role: &str) -> String {
        let s = self.quoted();
        let role = format!("\"{}\"", role.replace('"', "\"\""));
        format!(
            "GRANT USAGE ON SCHEMA {s} TO {role};\n\
             GRANT SELECT ON {s}.format TO {role};\n\
             GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.leases TO {role};\n\
             GRANT USAGE ON SEQUENCE {s}.tokens TO {role};\n\
             GRANT EXECUTE ON FUNCTION {s}.acquire(text, text, bigint), \
             {s}.release(text, text) TO {role};\n"
        )
    }

    /// `SELECT * FROM <schema>.acquire($1, $2, $3)`.
    pub(super) fn acquire(&self) -> String {
        format!(
            "SELECT token, remaining_ms FROM {}.acquire($1, $2, $3)",
            self.quoted()
        )
    }

    /// Extends a live lease of `$2` on `$1` to `$3` ms from now.
    pub(super) fn renew(&self) -> String {
        format!(
            "UPDATE {}.leases SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond' \
             WHERE name = $1 AND owner = $2 AND expires > clock_timestamp()",
            self.quoted()
        )
    }

    /// `SELECT <schema>.release($1, $2)`.
    pub(super) fn release(&self) -> String {
        format!("SELECT {}.release($1, $2)", self.quoted())
    }

    /// The live lease of `$1`: owner, token, ms left, ms since taken.
    pub(super) fn inspect(&self) -> String {
        format!(
            "SELECT owner, token, \
             ceil(extract(epoch FROM expires - clock_timestamp()) * 1000)::bigint, \
             floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint \
             FROM {}.leases WHERE name = $1 AND expires > clock_timestamp()",
            self.quoted()
        )
    }

    /// The names of live leases that start with `$3`, in order, after
    /// `$1`, at most `$2`.
    pub(super) fn held(&self) -> String {
        format!(
            "SELECT name FROM {}.leases WHERE expires > clock_timestamp() AND name > $1 \
             AND starts_with(name, $3) ORDER BY name LIMIT $2",
            self.quoted()
        )
    }

    /// Removes the lease of `$1` whoever holds it, telling waiters; the
    /// number of live leases removed.
    pub(super) fn force_release(&self) -> String {
        format!(
            "WITH gone AS (DELETE FROM {s}.leases WHERE name = $1 \
             RETURNING expires > clock_timestamp() AS live) \
             SELECT (SELECT count(*) FROM gone WHERE live), pg_notify('{c}', $1)::text",
            s = self.quoted(),
            c = self.name
        )
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
}
