-- take(name, owner, mode, size, ttl_ms) -> (token, place, wait_ms, queued, size)
--
-- Takes a lease of the lock `p_name` for `p_owner`, in mode `f` (fair),
-- `r`, `w` (read, write), `p` (one of `p_size` permits) or `s` (one of
-- `p_size` segments): its own again (same token, ttl from now), a new one
-- (`o_token`, and `o_place` for a segment), or none: ask again within
-- `o_wait_ms`, with a queue entry kept if `o_queued` (a fair waiter's place,
-- the first waiting writer's mark `m`, which keeps new readers out).
-- `o_size` alone: the holders use another number of permits.
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- channel (its NOTIFY channel).
CREATE OR REPLACE FUNCTION {schema}.take(p_name text, p_owner text, p_mode text,
    p_size integer, p_ttl_ms bigint, OUT o_token bigint, OUT o_place integer,
    OUT o_wait_ms bigint, OUT o_queued boolean, OUT o_size integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz;
    v_until timestamptz;
    v_mine {schema}.holders%ROWTYPE;
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
        PERFORM {schema}.read_committed();
    END IF;
    -- One request at a time per lock: each decides on all of its rows.
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
    v_now := clock_timestamp();
    v_until := v_now + p_ttl_ms * interval '1 millisecond';
    o_queued := false;
    IF EXISTS (SELECT 1 FROM {schema}.gone g WHERE g.owner = p_owner) THEN
        RETURN;
    END IF;
    -- Expired rows go, but for one a checked-in transaction holds: it
    -- cannot be removed before that ends, and is not waited for here (the
    -- statement's timeout would end the wait), so it counts as held.
    DELETE FROM {schema}.holders h WHERE h.ctid IN (
        SELECT x.ctid FROM {schema}.holders x WHERE x.name = p_name AND x.expires <= v_now
           FOR UPDATE SKIP LOCKED);
    SELECT * INTO v_mine FROM {schema}.holders h WHERE h.name = p_name AND h.owner = p_owner;
    IF v_mine.token > 0 THEN
        UPDATE {schema}.holders h SET expires = v_until WHERE h.name = p_name AND h.owner = p_owner;
        o_token := v_mine.token;
        o_place := v_mine.place;
        RETURN;
    END IF;
    IF p_mode = 'f' THEN
        IF v_mine.owner IS NULL THEN
            v_mine.seq := nextval('{schema}.tokens');
            INSERT INTO {schema}.holders (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, 'f', 0, v_until, v_now, v_mine.seq, 0, 0);
        END IF;
        SELECT min(h.seq) INTO v_first FROM {schema}.holders h WHERE h.name = p_name;
        IF v_first = v_mine.seq THEN
            UPDATE {schema}.holders h
               SET token = nextval('{schema}.tokens'), expires = v_until, taken = v_now
             WHERE h.name = p_name AND h.owner = p_owner
            RETURNING h.token INTO o_token;
            RETURN;
        END IF;
        UPDATE {schema}.holders h SET expires = v_until WHERE h.name = p_name AND h.owner = p_owner;
        -- Ask again by half the entry's ttl, or when one ahead could lapse.
        SELECT min(h.expires) INTO v_soonest
          FROM {schema}.holders h WHERE h.name = p_name AND h.seq < v_mine.seq;
        o_queued := true;
        o_wait_ms := least(p_ttl_ms / 2, {schema}.wait_ms(v_soonest));
        RETURN;
    END IF;
    IF p_mode IN ('r', 'w') THEN
        SELECT count(*) FILTER (WHERE h.mode IN ('r', 'w')),
               max(h.expires) FILTER (WHERE h.mode = 'w'),
               min(h.expires) FILTER (WHERE h.mode IN ('r', 'w'))
          INTO v_live, v_writer, v_soonest
          FROM {schema}.holders h WHERE h.name = p_name;
        SELECT h.owner, h.expires INTO v_mark_owner, v_mark_until
          FROM {schema}.holders h WHERE h.name = p_name AND h.mode = 'm';
        -- Another writer's mark keeps both readers and writers out.
        IF coalesce(v_mark_owner = p_owner, true)
           AND ((p_mode = 'w' AND v_live = 0) OR (p_mode = 'r' AND v_writer IS NULL)) THEN
            INSERT INTO {schema}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, p_mode, nextval('{schema}.tokens'), v_until, v_now, 0, 0, 0)
            ON CONFLICT (name, owner) DO UPDATE
               SET mode = excluded.mode, token = excluded.token,
                   expires = excluded.expires, taken = excluded.taken
            RETURNING h.token INTO o_token;
            RETURN;
        END IF;
        IF p_mode = 'w' AND coalesce(v_mark_owner = p_owner, true) THEN
            -- The first writer to wait: new readers wait behind it.
            INSERT INTO {schema}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
            VALUES (p_name, p_owner, 'm', 0, v_until, v_now, 0, 0, 0)
            ON CONFLICT (name, owner) DO UPDATE SET expires = excluded.expires;
            o_queued := true;
            o_wait_ms := least(p_ttl_ms / 2, {schema}.wait_ms(v_soonest));
        ELSIF p_mode = 'r' THEN
            o_wait_ms := {schema}.wait_ms(coalesce(v_writer, v_mark_until));
        ELSE
            o_wait_ms := {schema}.wait_ms(coalesce(v_soonest, v_mark_until));
        END IF;
        RETURN;
    END IF;
    SELECT count(*), min(h.expires), min(h.size), max(h.size)
      INTO v_live, v_soonest, v_least, v_most
      FROM {schema}.holders h WHERE h.name = p_name;
    IF v_live > 0 AND (v_least <> p_size OR v_most <> p_size) THEN
        o_size := CASE WHEN v_least <> p_size THEN v_least ELSE v_most END;
        RETURN;
    END IF;
    IF v_live >= p_size THEN
        o_wait_ms := {schema}.wait_ms(v_soonest);
        RETURN;
    END IF;
    -- The lowest free segment: 0, or one past a used one (fewer are used
    -- than there are, so it is in range).
    SELECT min(c.place) INTO o_place
      FROM (SELECT 0 AS place UNION ALL
            SELECT h.place + 1 FROM {schema}.holders h WHERE h.name = p_name) c
     WHERE NOT EXISTS (SELECT 1 FROM {schema}.holders h WHERE h.name = p_name AND h.place = c.place);
    INSERT INTO {schema}.holders AS h (name, owner, mode, token, expires, taken, seq, place, size)
    VALUES (p_name, p_owner, p_mode, nextval('{schema}.tokens'), v_until, v_now, 0, o_place, p_size)
    RETURNING h.token INTO o_token;
END
$$;
