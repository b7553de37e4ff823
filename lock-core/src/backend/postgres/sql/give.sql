-- give(name, owner) -> live
--
-- Ends `p_owner`'s lease or queue entry on the lock `p_name`, and tells the
-- waiters that may now go on, and only them: while a writer's mark stands,
-- that writer once the last holder is gone; the next in a fair queue when
-- the first place was freed; else the lock's waiters, when a writer or a
-- permit leaves, the last reader leaves, or a mark is withdrawn. True if
-- the lease or entry was live.
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- channel (its NOTIFY channel).
CREATE OR REPLACE FUNCTION {schema}.give(p_name text, p_owner text)
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
        PERFORM {schema}.read_committed();
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    v_now := clock_timestamp();
    DELETE FROM {schema}.holders h WHERE h.name = p_name AND h.owner = p_owner
    RETURNING h.mode, h.expires > v_now, h.seq, h.token INTO v_mode, v_live, v_seq, v_token;
    -- A queue entry is asked for again and again: one of those requests
    -- may still be on its way.
    IF NOT coalesce(v_live AND v_token > 0, false) THEN
        PERFORM {schema}.bury(p_owner);
    END IF;
    IF NOT coalesce(v_live, false) THEN
        RETURN false;
    END IF;
    IF v_mode = 'f' THEN
        IF NOT EXISTS (SELECT 1 FROM {schema}.holders h
                        WHERE h.name = p_name AND h.expires > v_now AND h.seq < v_seq) THEN
            SELECT h.owner INTO v_next FROM {schema}.holders h
             WHERE h.name = p_name AND h.expires > v_now ORDER BY h.seq LIMIT 1;
            IF v_next IS NOT NULL THEN
                PERFORM pg_notify('{channel}', p_name || ' ' || v_next);
            END IF;
        END IF;
        RETURN true;
    END IF;
    SELECT EXISTS (SELECT 1 FROM {schema}.holders h WHERE h.name = p_name
                      AND h.expires > v_now AND h.mode IN ('r', 'w'))
      INTO v_holders;
    IF v_mode = 'm' THEN
        IF NOT EXISTS (SELECT 1 FROM {schema}.holders h WHERE h.name = p_name
                          AND h.expires > v_now AND h.mode = 'w') THEN
            PERFORM pg_notify('{channel}', p_name);
        END IF;
        RETURN true;
    END IF;
    SELECT h.owner INTO v_next FROM {schema}.holders h
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
