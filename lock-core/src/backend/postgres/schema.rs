//! The tables and functions of one namespace, in a schema of its name,
//! with the format version they carry.
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
-- An interval in whole milliseconds, rounded up, none below zero.
CREATE OR REPLACE FUNCTION {s}.ms(p_span interval) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(0, ceil(extract(epoch FROM p_span) * 1000))::bigint
$$;
-- How long a waiter sleeps before it asks again for a lock held until
-- `p_until`: the time left, or {LOCKED_POLL_MS} ms for a holder past its
-- expiry that a checked-in transaction keeps (not a spin).
CREATE OR REPLACE FUNCTION {s}.wait_ms(p_until timestamptz) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_until > clock_timestamp() THEN {s}.ms(p_until - clock_timestamp())
                WHEN p_until IS NOT NULL THEN {LOCKED_POLL_MS} END
$$;
-- Owner values whose release came first: a request with one of them
-- that reaches the server later (held up in a pooler's queue, or on
-- another connection) takes nothing. Kept longer than a request is held
-- up (a pooler's query_wait_timeout is 120 s by default).
CREATE TABLE IF NOT EXISTS {s}.gone (
    owner text PRIMARY KEY,
    until timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS gone_until ON {s}.gone (until);
CREATE OR REPLACE FUNCTION {s}.bury(p_owner text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {s}.gone (owner, until) VALUES (p_owner, clock_timestamp() + interval '3 minutes')
    ON CONFLICT (owner) DO NOTHING;
$$;
-- Every function decides on what it reads after waiting for its lock,
-- which only read committed shows it (a pooler passes no startup option
-- that would set it).
CREATE OR REPLACE FUNCTION {s}.read_committed() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION USING ERRCODE = 'LK001', MESSAGE = format(
            'the lock functions need read committed, not %s: ALTER ROLE %I SET '
            'default_transaction_isolation = ''read committed''',
            current_setting('transaction_isolation'), current_user);
    END IF;
END
$$;
-- Removes rows that ended a minute ago or more and that no later request
-- on their name removed (a key nobody locks again), skipping any that a
-- transaction holds; each Locker runs it about once a minute.
CREATE OR REPLACE FUNCTION {s}.sweep() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_swept bigint := 0;
    v_n bigint;
BEGIN
    DELETE FROM {s}.leases WHERE ctid IN (
        SELECT l.ctid FROM {s}.leases l
         WHERE l.expires < clock_timestamp() - interval '1 minute'
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_swept := v_swept + v_n;
    DELETE FROM {s}.holders WHERE ctid IN (
        SELECT h.ctid FROM {s}.holders h
         WHERE h.expires < clock_timestamp() - interval '1 minute'
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_swept := v_swept + v_n;
    DELETE FROM {s}.gone WHERE ctid IN (
        SELECT g.ctid FROM {s}.gone g WHERE g.until < clock_timestamp()
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_swept + v_n;
END
$$;
CREATE TABLE IF NOT EXISTS {s}.leases (
    name text PRIMARY KEY,
    owner text NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    taken timestamptz NOT NULL,
    waited boolean NOT NULL DEFAULT false
);
-- Takes the lease of `p_name` for `p_owner`: a new one, its own again
-- (same token, ttl from now), or none: `remaining_ms` of the holder's.
-- Every grant of a name happens under the name's transaction lock, held
-- to the commit, so a later grant draws a later token.
CREATE OR REPLACE FUNCTION {s}.acquire(p_name text, p_owner text, p_ttl_ms bigint,
    OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_owner text;
    v_expires timestamptz;
    v_waited boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {s}.read_committed();
    END IF;
    -- One request at a time per lock: a release that buries an owner value
    -- waits for an acquire with it that is under way (see release).
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    IF EXISTS (SELECT 1 FROM {s}.gone g WHERE g.owner = p_owner) THEN
        remaining_ms := 0;
        RETURN;
    END IF;
    v_now := clock_timestamp();
    INSERT INTO {s}.leases AS l (name, owner, token, expires, taken)
    VALUES (p_name, p_owner, nextval('{s}.tokens'), v_now + p_ttl_ms * interval '1 millisecond',
            v_now)
    ON CONFLICT (name) DO NOTHING
    RETURNING l.token INTO token;
    IF FOUND THEN
        RETURN;
    END IF;
    -- The row lock a checked-in transaction's FOR KEY SHARE holds off: no
    -- takeover while one is open. Renewals need only a weaker lock.
    SELECT l.owner, l.expires, l.waited INTO v_owner, v_expires, v_waited
      FROM {s}.leases l WHERE l.name = p_name FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Held by a checked-in transaction (see check_in) until it ends,
        -- whatever the expiry says: not waited for here, where the
        -- statement's timeout would end the wait, but marked so that the
        -- release notifies. A lease that ran out under such a transaction
        -- is asked for again within {LOCKED_POLL_MS} ms; a row gone since
        -- at once.
        SELECT l.expires, l.waited INTO v_expires, v_waited
          FROM {s}.leases l WHERE l.name = p_name;
        IF NOT v_waited THEN
            UPDATE {s}.leases l SET waited = true WHERE l.name = p_name;
        END IF;
        remaining_ms := coalesce({s}.wait_ms(v_expires), 0);
        RETURN;
    END IF;
    v_now := clock_timestamp();
    IF v_owner = p_owner AND v_expires > v_now THEN
        UPDATE {s}.leases l SET expires = v_now + p_ttl_ms * interval '1 millisecond'
         WHERE l.name = p_name RETURNING l.token INTO token;
    ELSIF v_expires <= v_now THEN
        UPDATE {s}.leases l
           SET owner = p_owner, token = nextval('{s}.tokens'), taken = v_now, waited = false,
               expires = v_now + p_ttl_ms * interval '1 millisecond'
         WHERE l.name = p_name RETURNING l.token INTO token;
    ELSE
        IF NOT v_waited THEN
            UPDATE {s}.leases l SET waited = true WHERE l.name = p_name;
        END IF;
        remaining_ms := {s}.ms(v_expires - v_now);
    END IF;
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
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {s}.read_committed();
    END IF;
    DELETE FROM {s}.leases l WHERE l.name = p_name AND l.owner = p_owner
    RETURNING l.expires > clock_timestamp(), l.waited INTO v_live, v_waited;
    IF v_live IS NULL THEN
        -- Nothing to end: an acquire with this owner value may be under way
        -- (its row not committed yet). Once it is done, look again, and
        -- bury the value so that a later one takes nothing.
        PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
        DELETE FROM {s}.leases l WHERE l.name = p_name AND l.owner = p_owner
        RETURNING l.expires > clock_timestamp(), l.waited INTO v_live, v_waited;
    END IF;
    IF NOT coalesce(v_live, false) THEN
        PERFORM {s}.bury(p_owner);
        RETURN false;
    END IF;
    IF v_waited THEN
        PERFORM pg_notify('{channel}', p_name);
    END IF;
    RETURN true;
END
$$;
CREATE TABLE IF NOT EXISTS {s}.holders (
    name text NOT NULL,
    owner text NOT NULL,
    mode text NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    taken timestamptz NOT NULL,
    seq bigint NOT NULL,
    place integer NOT NULL,
    size integer NOT NULL,
    PRIMARY KEY (name, owner)
);
-- Takes a lease of the lock `p_name` for `p_owner`, in mode `f` (fair),
-- `r`, `w` (read, write), `p` (one of `p_size` permits) or `s` (one of
-- `p_size` segments): its own again (same token, ttl from now), a new one
-- (`o_token`, and `o_place` for a segment), or none: ask again within
-- `o_wait_ms`, with a queue entry kept if `o_queued` (a fair waiter's place,
-- the first waiting writer's mark `m`, which keeps new readers out).
-- `o_size` alone: the holders use another number of permits.
CREATE OR REPLACE FUNCTION {s}.take(p_name text, p_owner text, p_mode text,
    p_size integer, p_ttl_ms bigint, OUT o_token bigint, OUT o_place integer,
    OUT o_wait_ms bigint, OUT o_queued boolean, OUT o_size integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_until timestamptz;
    v_mine {s}.holders%ROWTYPE;
    v_live bigint;
    v_soonest timestamptz;
    v_writer timestamptz;
    v_mark_owner text;
    v_mark_until timestamptz;
    v_first bigint;
    v_least integer;
    v_most integer;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {s}.read_committed();
    END IF;
    -- One request at a time per lock: each decides on all of its rows.
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    v_now := clock_timestamp();
    v_until := v_now + p_ttl_ms * interval '1 millisecond';
    o_queued := false;
    IF EXISTS (SELECT 1 FROM {s}.gone g WHERE g.owner = p_owner) THEN
        RETURN;
    END IF;
    -- Expired rows go, but for one a checked-in transaction holds: it
    -- cannot be removed before that ends, and is not waited for here (the
    -- statement's timeout would end the wait), so it counts as held.
    DELETE FROM {s}.holders h WHERE h.ctid IN (
        SELECT x.ctid FROM {s}.holders x WHERE x.name = p_name AND x.expires <= v_now
           FOR UPDATE SKIP LOCKED);
    SELECT * INTO v_mine FROM {s}.holders h WHERE h.name = p_name AND h.owner = p_owner;
    IF v_mine.token > 0 THEN
        UPDATE {s}.holders h SET expires = v_until WHERE h.name = p_name AND h.owner = p_owner;
        o_token := v_mine.token;
        o_place := v_mine.place;
        RETURN;
    END IF;
    IF p_mode = 'f' THEN
        IF v_mine.owner IS NULL THEN
            v_mine.seq := nextval('{s}.tokens');
            INSERT INTO {s}.holders (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, 'f', 0, v_until, v_now, v_mine.seq, 0, 0);
        END IF;
        SELECT min(h.seq) INTO v_first FROM {s}.holders h WHERE h.name = p_name;
        IF v_first = v_mine.seq THEN
            UPDATE {s}.holders h
               SET token = nextval('{s}.tokens'), expires = v_until, taken = v_now
             WHERE h.name = p_name AND h.owner = p_owner
            RETURNING h.token INTO o_token;
            RETURN;
        END IF;
        UPDATE {s}.holders h SET expires = v_until WHERE h.name = p_name AND h.owner = p_owner;
        -- Ask again by half the entry's ttl, or when one ahead could lapse.
        SELECT min(h.expires) INTO v_soonest
          FROM {s}.holders h WHERE h.name = p_name AND h.seq < v_mine.seq;
        o_queued := true;
        o_wait_ms := least(p_ttl_ms / 2, {s}.wait_ms(v_soonest));
        RETURN;
    END IF;
    IF p_mode IN ('r', 'w') THEN
        SELECT count(*) FILTER (WHERE h.mode IN ('r', 'w')),
               max(h.expires) FILTER (WHERE h.mode = 'w'),
               min(h.expires) FILTER (WHERE h.mode IN ('r', 'w'))
          INTO v_live, v_writer, v_soonest
          FROM {s}.holders h WHERE h.name = p_name;
        SELECT h.owner, h.expires INTO v_mark_owner, v_mark_until
          FROM {s}.holders h WHERE h.name = p_name AND h.mode = 'm';
        -- Another writer's mark keeps both readers and writers out.
        IF coalesce(v_mark_owner = p_owner, true)
           AND ((p_mode = 'w' AND v_live = 0) OR (p_mode = 'r' AND v_writer IS NULL)) THEN
            INSERT INTO {s}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, p_mode, nextval('{s}.tokens'), v_until, v_now, 0, 0, 0)
            ON CONFLICT (name, owner) DO UPDATE
               SET mode = excluded.mode, token = excluded.token,
                   expires = excluded.expires, taken = excluded.taken
            RETURNING h.token INTO o_token;
            RETURN;
        END IF;
        IF p_mode = 'w' AND coalesce(v_mark_owner = p_owner, true) THEN
            -- The first writer to wait: new readers wait behind it.
            INSERT INTO {s}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, 'm', 0, v_until, v_now, 0, 0, 0)
            ON CONFLICT (name, owner) DO UPDATE SET expires = excluded.expires;
            o_queued := true;
            o_wait_ms := least(p_ttl_ms / 2, {s}.wait_ms(v_soonest));
        ELSIF p_mode = 'r' THEN
            o_wait_ms := {s}.wait_ms(coalesce(v_writer, v_mark_until));
        ELSE
            o_wait_ms := {s}.wait_ms(coalesce(v_soonest, v_mark_until));
        END IF;
        RETURN;
    END IF;
    SELECT count(*), min(h.expires), min(h.size), max(h.size)
      INTO v_live, v_soonest, v_least, v_most
      FROM {s}.holders h WHERE h.name = p_name;
    IF v_live > 0 AND (v_least <> p_size OR v_most <> p_size) THEN
        o_size := CASE WHEN v_least <> p_size THEN v_least ELSE v_most END;
        RETURN;
    END IF;
    IF v_live >= p_size THEN
        o_wait_ms := {s}.wait_ms(v_soonest);
        RETURN;
    END IF;
    -- The lowest free segment: 0, or one past a used one (fewer are used
    -- than there are, so it is in range).
    SELECT min(c.place) INTO o_place
      FROM (SELECT 0 AS place UNION ALL
            SELECT h.place + 1 FROM {s}.holders h WHERE h.name = p_name) c
     WHERE NOT EXISTS (SELECT 1 FROM {s}.holders h WHERE h.name = p_name AND h.place = c.place);
    INSERT INTO {s}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
    VALUES (p_name, p_owner, p_mode, nextval('{s}.tokens'), v_until, v_now, 0, o_place, p_size)
    RETURNING h.token INTO o_token;
END
$$;
-- Ends `p_owner`'s lease or queue entry on the lock `p_name`, and tells the
-- waiters that may now go on, and only them: while a writer's mark stands,
-- that writer once the last holder is gone; the next in a fair queue when
-- the first place was freed; else the lock's waiters, when a writer or a
-- permit leaves, the last reader leaves, or a mark is withdrawn. True if
-- the lease or entry was live.
CREATE OR REPLACE FUNCTION {s}.give(p_name text, p_owner text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_mode text;
    v_live boolean;
    v_seq bigint;
    v_token bigint;
    v_next text;
    v_holders boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {s}.read_committed();
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    v_now := clock_timestamp();
    DELETE FROM {s}.holders h WHERE h.name = p_name AND h.owner = p_owner
    RETURNING h.mode, h.expires > v_now, h.seq, h.token INTO v_mode, v_live, v_seq, v_token;
    -- A queue entry is asked for again and again: one of those requests
    -- may still be on its way.
    IF NOT coalesce(v_live AND v_token > 0, false) THEN
        PERFORM {s}.bury(p_owner);
    END IF;
    IF NOT coalesce(v_live, false) THEN
        RETURN false;
    END IF;
    IF v_mode = 'f' THEN
        IF NOT EXISTS (SELECT 1 FROM {s}.holders h
                        WHERE h.name = p_name AND h.expires > v_now AND h.seq < v_seq) THEN
            SELECT h.owner INTO v_next FROM {s}.holders h
             WHERE h.name = p_name AND h.expires > v_now ORDER BY h.seq LIMIT 1;
            IF v_next IS NOT NULL THEN
                PERFORM pg_notify('{channel}', p_name || ' ' || v_next);
            END IF;
        END IF;
        RETURN true;
    END IF;
    SELECT EXISTS (SELECT 1 FROM {s}.holders h WHERE h.name = p_name
                      AND h.expires > v_now AND h.mode IN ('r', 'w'))
      INTO v_holders;
    IF v_mode = 'm' THEN
        IF NOT EXISTS (SELECT 1 FROM {s}.holders h WHERE h.name = p_name
                          AND h.expires > v_now AND h.mode = 'w') THEN
            PERFORM pg_notify('{channel}', p_name);
        END IF;
        RETURN true;
    END IF;
    SELECT h.owner INTO v_next FROM {s}.holders h
     WHERE h.name = p_name AND h.expires > v_now AND h.mode = 'm';
    IF v_next IS NOT NULL THEN
        IF NOT v_holders THEN
            PERFORM pg_notify('{channel}', p_name || ' ' || v_next);
        END IF;
    ELSIF v_mode <> 'r' OR NOT v_holders THEN
        PERFORM pg_notify('{channel}', p_name);
    END IF;
    RETURN true;
END
$$;
-- Removes every holder and queue entry of the plain lock `p_lease` and of
-- the locks `p_names` (the other kinds on the key), for an operator breaking
-- a wedged lock, and wakes every waiter (at the commit: none is granted
-- before all are gone). The number of live ones removed, and the highest
-- token among them (0 for none).
CREATE OR REPLACE FUNCTION {s}.force_release_all(p_lease text, p_names text[],
    OUT o_removed bigint, OUT o_up_to bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
    v_gone record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {s}.read_committed();
    END IF;
    -- Every kind's transaction lock first (in one order, so two of these
    -- cannot deadlock; a request takes one): no grant of any kind comes
    -- between the deletes below.
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), h)
       FROM (SELECT DISTINCT hashtext(n) AS h FROM unnest(p_names || p_lease) n ORDER BY 1) l;
    o_removed := 0;
    o_up_to := 0;
    FOR v_gone IN DELETE FROM {s}.leases l WHERE l.name = p_lease
                  RETURNING l.token, l.expires > clock_timestamp() AS live LOOP
        IF v_gone.live THEN
            o_removed := o_removed + 1;
            o_up_to := greatest(o_up_to, v_gone.token);
        END IF;
    END LOOP;
    PERFORM pg_notify('{channel}', p_lease);
    FOREACH v_name IN ARRAY p_names LOOP
        FOR v_gone IN DELETE FROM {s}.holders h WHERE h.name = v_name
                      RETURNING h.owner, h.token, h.expires > clock_timestamp() AS live LOOP
            IF v_gone.live THEN
                o_removed := o_removed + 1;
                o_up_to := greatest(o_up_to, v_gone.token);
                IF v_gone.token = 0 THEN
                    PERFORM pg_notify('{channel}', v_name || ' ' || v_gone.owner);
                END IF;
            END IF;
        END LOOP;
        PERFORM pg_notify('{channel}', v_name);
    END LOOP;
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
             GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.leases, {s}.holders, {s}.gone TO {role};\n\
             GRANT USAGE ON SEQUENCE {s}.tokens TO {role};\n\
             GRANT EXECUTE ON FUNCTION {s}.ms(interval), {s}.wait_ms(timestamptz), {s}.bury(text), {s}.read_committed(), \
             {s}.sweep(), {s}.acquire(text, text, bigint), \
             {s}.release(text, text), {s}.take(text, text, text, integer, bigint), \
             {s}.give(text, text), {s}.force_release_all(text, text[]) TO {role};\n\
             -- Behind a transaction pooler, the role's sessions must read committed:\n\
             -- ALTER ROLE {role} SET default_transaction_isolation = 'read committed';\n"
        )
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

    /// Extends a live lease of `$2` on `$1` to `$3` ms from now.
    pub(super) fn renew(&self) -> Sql {
        let text = format!(
            "UPDATE {}.leases SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond' \
             WHERE name = $1 AND owner = $2 AND expires > clock_timestamp() RETURNING 1",
            self.quoted()
        );
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT, Type::INT8],
        }
    }

    /// Extends a live lease (not a queue entry) of `$2` on the lock `$1` of
    /// another kind to `$3` ms from now.
    pub(super) fn renew_holder(&self) -> Sql {
        let text = format!(
            "UPDATE {}.holders SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond' \
             WHERE name = $1 AND owner = $2 AND token > 0 AND expires > clock_timestamp() \
             RETURNING 1",
            self.quoted()
        );
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT, Type::INT8],
        }
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

    /// The live holders and queue entries of the plain lock `$1` and of
    /// the locks `$2` (the key's other kinds): mode (`x` for the plain
    /// lock), owner, token (0 for a queue entry), ms left, ms since taken,
    /// segment, size.
    pub(super) fn inspect(&self) -> Sql {
        let text = format!(
            "SELECT 'x', owner, token, {s}.ms(expires - clock_timestamp()), \
             floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, 0, 0 \
             FROM {s}.leases WHERE name = $1 AND expires > clock_timestamp() \
             UNION ALL \
             SELECT mode, owner, token, {s}.ms(expires - clock_timestamp()), \
             floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, place, size \
             FROM {s}.holders WHERE name = ANY($2) AND expires > clock_timestamp()",
            s = self.quoted()
        );
        Sql {
            text,
            types: &[Type::TEXT, Type::TEXT_ARRAY],
        }
    }

    /// The names of live locks (of every kind) that start with `$3`, in
    /// order, after `$1`, at most `$2`.
    pub(super) fn held(&self) -> Sql {
        let text = format!(
            "SELECT name COLLATE \"C\" FROM {s}.leases WHERE expires > clock_timestamp() \
             AND name COLLATE \"C\" > $1 AND starts_with(name, $3) \
             UNION \
             SELECT name COLLATE \"C\" FROM {s}.holders WHERE expires > clock_timestamp() \
             AND name COLLATE \"C\" > $1 AND starts_with(name, $3) \
             ORDER BY 1 LIMIT $2",
            s = self.quoted()
        );
        Sql {
            text,
            types: &[Type::TEXT, Type::INT8, Type::TEXT],
        }
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
}
