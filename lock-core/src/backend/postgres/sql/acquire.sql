-- acquire(name, owner, ttl_ms) -> (token, remaining_ms)
--
-- Takes the lease of `p_name` for `p_owner`: a new one, its own again
-- (same token, ttl from now), or none: `remaining_ms` of the holder's.
-- Every grant of a name happens under the name's transaction lock, held
-- to the commit, so a later grant draws a later token.
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- channel (its NOTIFY channel), locked_poll_ms (how soon a waiter asks
-- again behind a checked-in transaction).
CREATE OR REPLACE FUNCTION {schema}.acquire(p_name text, p_owner text, p_ttl_ms bigint,
    OUT token bigint, OUT remaining_ms bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_owner text;
    v_expires timestamptz;
    v_waited boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {schema}.read_committed();
    END IF;
    -- One request at a time per lock: a release that buries an owner value
    -- waits for an acquire with it that is under way (see release).
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    IF EXISTS (SELECT 1 FROM {schema}.gone g WHERE g.owner = p_owner) THEN
        remaining_ms := 0;
        RETURN;
    END IF;
    v_now := clock_timestamp();
    INSERT INTO {schema}.leases AS l (name, owner, token, expires, taken)
    VALUES (p_name, p_owner, nextval('{schema}.tokens'), v_now + p_ttl_ms * interval '1 millisecond',
            v_now)
    ON CONFLICT (name) DO NOTHING
    RETURNING l.token INTO token;
    IF FOUND THEN
        RETURN;
    END IF;
    -- The row lock a checked-in transaction's FOR KEY SHARE holds off: no
    -- takeover while one is open. Renewals need only a weaker lock.
    SELECT l.owner, l.expires, l.waited INTO v_owner, v_expires, v_waited
      FROM {schema}.leases l WHERE l.name = p_name FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        -- Held by a checked-in transaction (see check_in) until it ends,
        -- whatever the expiry says: not waited for here, where the
        -- statement's timeout would end the wait, but marked so that the
        -- release notifies. A lease that ran out under such a transaction
        -- is asked for again within {locked_poll_ms} ms; a row gone since
        -- at once.
        SELECT l.expires, l.waited INTO v_expires, v_waited
          FROM {schema}.leases l WHERE l.name = p_name;
        IF NOT v_waited THEN
            UPDATE {schema}.leases l SET waited = true WHERE l.name = p_name;
        END IF;
        remaining_ms := coalesce({schema}.wait_ms(v_expires), 0);
        RETURN;
    END IF;
    v_now := clock_timestamp();
    IF v_owner = p_owner AND v_expires > v_now THEN
        UPDATE {schema}.leases l SET expires = v_now + p_ttl_ms * interval '1 millisecond'
         WHERE l.name = p_name RETURNING l.token INTO token;
    ELSIF v_expires <= v_now THEN
        UPDATE {schema}.leases l
           SET owner = p_owner, token = nextval('{schema}.tokens'), taken = v_now, waited = false,
               expires = v_now + p_ttl_ms * interval '1 millisecond'
         WHERE l.name = p_name RETURNING l.token INTO token;
    ELSE
        IF NOT v_waited THEN
            UPDATE {schema}.leases l SET waited = true WHERE l.name = p_name;
        END IF;
        remaining_ms := {schema}.ms(v_expires - v_now);
    END IF;
END
$$;
