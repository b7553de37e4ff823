-- Extends a live plain lease of owner $2 on the lock $1 to $3 ms from now;
-- a row back if it did (none for a lease gone, ended or of another owner).
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
UPDATE {schema}.leases SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond'
 WHERE name = $1 AND owner = $2 AND expires > clock_timestamp()
RETURNING 1
