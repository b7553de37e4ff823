-- wait_ms(until) -> bigint
--
-- How long a waiter sleeps before it asks again for a lock held until
-- `p_until`: the time left, or {locked_poll_ms} ms for a holder past its
-- expiry that a checked-in transaction keeps (not a spin).
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- locked_poll_ms.
CREATE OR REPLACE FUNCTION {schema}.wait_ms(p_until timestamptz) RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    SELECT CASE WHEN p_until > clock_timestamp() THEN {schema}.ms(p_until - clock_timestamp())
                WHEN p_until IS NOT NULL THEN {locked_poll_ms} END
$$;
