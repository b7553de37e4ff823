-- Extends a live plain lease of owner ?3 on the lock ?2 to ?1 ms from now;
-- one row matched if it did (none for a lease gone, ended or of another
-- owner).
--
-- Placeholder, in braces below: ns (the namespace).
UPDATE `{ns}_leases` SET expires = UTC_TIMESTAMP(6) + INTERVAL ? * 1000 MICROSECOND
 WHERE name = ? AND owner = ? AND expires > UTC_TIMESTAMP(6)
