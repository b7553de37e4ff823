-- The stored names of live locks (of every kind) that start with $3, in
-- byte order, after $1, at most $2: one page of a listing. It only reads.
--
-- Placeholder, in braces below: schema (the namespace's schema, quoted).
SELECT name COLLATE "C" FROM {schema}.leases WHERE expires > clock_timestamp()
   AND name COLLATE "C" > $1 AND starts_with(name, $3)
UNION
SELECT name COLLATE "C" FROM {schema}.holders WHERE expires > clock_timestamp()
   AND name COLLATE "C" > $1 AND starts_with(name, $3)
ORDER BY 1 LIMIT $2
