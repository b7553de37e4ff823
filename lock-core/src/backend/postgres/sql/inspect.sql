-- The live holders and queue entries of the plain lock $1 and of the locks
-- $2 (the key's other kinds), one row each: mode (`x` for the plain lock),
-- owner, token (0 for a queue entry), ms left, ms since taken, segment,
-- size. It only reads.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
SELECT 'x', owner, token, {schema}.ms(expires - clock_timestamp()),
       floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, 0, 0
  FROM {schema}.leases WHERE name = $1 AND expires > clock_timestamp()
UNION ALL
SELECT mode, owner, token, {schema}.ms(expires - clock_timestamp()),
       floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, place, size
  FROM {schema}.holders WHERE name = ANY($2) AND expires > clock_timestamp()
