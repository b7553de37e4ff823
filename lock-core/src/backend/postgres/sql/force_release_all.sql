-- force_release_all(lease, names) -> (removed, up_to)
--
-- Removes every holder and queue entry of the plain lock `p_lease` and of
-- the locks `p_names` (the other kinds on the key), for an operator breaking
-- a wedged lock, and wakes every waiter (at the commit: none is granted
-- before all are gone). The number of live ones removed, and the highest
-- token among them (0 for none).
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- channel (its NOTIFY channel).
CREATE OR REPLACE FUNCTION {schema}.force_release_all(p_lease text, p_names text[],
    OUT o_removed bigint, OUT o_up_to bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_name text;
    v_gone record;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {schema}.read_committed();
    END IF;
    -- Every kind's transaction lock first (in one order, so two of these
    -- cannot deadlock; a request takes one): no grant of any kind comes
    -- between the deletes below.
    PERFORM pg_advisory_xact_lock(hashtext('{channel}'), h)
       FROM (SELECT DISTINCT hashtext(n) AS h FROM unnest(p_names || p_lease) n ORDER BY 1) l;
    o_removed := 0;
    o_up_to := 0;
    FOR v_gone IN DELETE FROM {schema}.leases l WHERE l.name = p_lease
                  RETURNING l.token, l.expires > clock_timestamp() AS live LOOP
        IF v_gone.live THEN
            o_removed := o_removed + 1;
            o_up_to := greatest(o_up_to, v_gone.token);
        END IF;
    END LOOP;
    PERFORM pg_notify('{channel}', p_lease);
    FOREACH v_name IN ARRAY p_names LOOP
        FOR v_gone IN DELETE FROM {schema}.holders h WHERE h.name = v_name
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
