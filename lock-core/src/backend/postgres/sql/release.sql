-- release(name, owner) -> live
--
-- Ends `p_owner`'s lease of `p_name`; tells waiters if any found it held.
-- True if the lease was live.
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- channel (its NOTIFY channel).
CREATE OR REPLACE FUNCTION {schema}.release(p_name text, p_owner text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_live boolean;
    v_waited boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {schema}.read_committed();
    END IF;
    DELETE FROM {schema}.leases l WHERE l.name = p_name AND l.owner = p_owner
    RETURNING l.expires > clock_timestamp(), l.waited INTO v_live, v_waited;
    IF v_live IS NULL THEN
        -- Nothing to end: an acquire with this owner value may be under way
        -- (its row not committed yet). Once it is done, look again, and
        -- bury the value so that a later one takes nothing.
        PERFORM pg_advisory_xact_lock(hashtext('{channel}'), hashtext(p_name));
        DELETE FROM {schema}.leases l WHERE l.name = p_name AND l.owner = p_owner
        RETURNING l.expires > clock_timestamp(), l.waited INTO v_live, v_waited;
    END IF;
    IF NOT coalesce(v_live, false) THEN
        PERFORM {schema}.bury(p_owner);
        RETURN false;
    END IF;
    IF v_waited THEN
        PERFORM pg_notify('{channel}', p_name);
    END IF;
    RETURN true;
END
$$;
