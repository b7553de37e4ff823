-- sweep() -> rows removed
--
-- Removes rows that ended a minute ago or more and that no later request
-- on their name removed (a key nobody locks again), skipping any that a
-- transaction holds; each Locker runs it about once a minute.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
CREATE OR REPLACE FUNCTION {schema}.sweep() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_swept bigint := 0;
    v_n bigint;
BEGIN
    DELETE FROM {schema}.leases WHERE ctid IN (
        SELECT l.ctid FROM {schema}.leases l
         WHERE l.expires < clock_timestamp() - interval '1 minute'
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_swept := v_swept + v_n;
    DELETE FROM {schema}.holders WHERE ctid IN (
        SELECT h.ctid FROM {schema}.holders h
         WHERE h.expires < clock_timestamp() - interval '1 minute'
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    v_swept := v_swept + v_n;
    DELETE FROM {schema}.gone WHERE ctid IN (
        SELECT g.ctid FROM {schema}.gone g WHERE g.until < clock_timestamp()
         LIMIT 1000 FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_swept + v_n;
END
$$;
