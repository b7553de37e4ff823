-- ms(span) -> bigint
--
-- An interval in whole milliseconds, rounded up, none below zero.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
CREATE OR REPLACE FUNCTION {schema}.ms(p_span interval) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT greatest(0, ceil(extract(epoch FROM p_span) * 1000))::bigint
$$;
