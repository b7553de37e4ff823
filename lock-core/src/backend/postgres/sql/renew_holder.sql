-- Extends a live lease (not a queue entry) of owner $2 on the lock $1 of
-- another kind to $3 ms from now; a row back if it did.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
UPDATE {schema}.holders SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond'
 WHERE name = $1 AND owner = $2 AND token > 0 AND expires > clock_timestamp()
RETURNING 1
