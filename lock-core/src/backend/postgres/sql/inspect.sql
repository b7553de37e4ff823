-- The live holders and queue entries of the plain lock $1 and of the locks
-- $2 (the key's other kinds), one row each: mode (`x` for the plain lock,
-- `m` for a waiting writer's mark), owner, token (0 for a queue entry), ms
-- left, ms since taken, segment, size, seq (a fair queue entry's place in
-- line), and whether a waiter marked the plain lock's lease. It only reads.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
SELECT 'x', owner, token, {schema}.ms(expires - clock_timestamp()),
       floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, 0, 0,
       0::bigint, waited
  FROM {schema}.leases WHERE name = $1 AND expires > clock_timestamp()
UNION ALL
SELECT mode, owner, token, {schema}.ms(expires - clock_timestamp()),
       floor(extract(epoch FROM clock_timestamp() - taken) * 1000)::bigint, place, size,
       seq, false
  FROM {schema}.holders WHERE name = ANY($2) AND expires > clock_timestamp()
