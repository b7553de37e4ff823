-- read_committed()
--
-- Raises LK001, naming the ALTER ROLE that fixes it, for a transaction
-- that does not read committed; each lock function calls it first. Every
-- function decides on what it reads after waiting for its lock,
-- which only read committed shows it (a pooler passes no startup option
-- that would set it).
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
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
