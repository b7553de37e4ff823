-- bury(owner)
--
-- Remembers an owner value whose release came first (see the `gone`
-- table), for 3 minutes: a request with it that arrives later takes nothing.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
CREATE OR REPLACE FUNCTION {schema}.bury(p_owner text) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO {schema}.gone (owner, until) VALUES (p_owner, clock_timestamp() + interval '3 minutes')
    ON CONFLICT (owner) DO NOTHING;
$$;
