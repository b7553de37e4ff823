-- The functions the others call:
--   ms(span) -> bigint             an interval in whole milliseconds
--   wait_ms(until) -> bigint       how long a waiter sleeps
--   bury(owner)                    an owner value whose release came first
--   read_committed()               the error for another isolation level
--
-- {schema} is the namespace's schema, quoted; {locked_poll_ms} how soon a
-- waiter asks again behind a checked-in transaction.
-- An interval in whole milliseconds, rounded up, none below zero.
CREATE OR REPLACE FUNCTION {schema}.ms(p_span interval) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(0, ceil(extract(epoch FROM p_span) * 1000))::bigint
$$;
-- How long a waiter sleeps before it asks again for a lock held until
-- `p_until`: the time left, or {locked_poll_ms} ms for a holder past its
-- expiry that a checked-in transaction keeps (not a spin).
CREATE OR REPLACE FUNCTION {schema}.wait_ms(p_until timestamptz) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_until > clock_timestamp() THEN {schema}.ms(p_until - clock_timestamp())
                WHEN p_until IS NOT NULL THEN {locked_poll_ms} END
$$;
CREATE OR REPLACE FUNCTION {schema}.bury(p_owner text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {schema}.gone (owner, until) VALUES (p_owner, clock_timestamp() + interval '3 minutes')
    ON CONFLICT (owner) DO NOTHING;
$$;
-- Every function decides on what it reads after waiting for its lock,
-- which only read committed shows it (a pooler passes no startup option
-- that would set it).
CREATE OR REPLACE FUNCTION {schema}.read_committed() RETURNS void
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
