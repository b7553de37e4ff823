-- Extends a live lease (not a queue entry) of owner ?3 on the lock ?2 of
-- another kind to ?1 ms from now; one row matched if it did.
--
-- Placeholder, in braces below: ns (the namespace).
UPDATE `{ns}_holders` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND
 WHERE name = ? AND owner = ? AND token > 0 AND expires > UTC_TIMESTAMP(6)
