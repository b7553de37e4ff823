-- One page of a listing: the stored names of live locks of every kind,
-- in byte order, after a name, matching a LIKE prefix pattern, at most a
-- page of them. Its parameters are after, pattern and page for each table,
-- then the page again. It only reads.
--
-- Placeholder, in braces below: ns (the namespace).
(SELECT name FROM `{ns}_leases` WHERE expires > UTC_TIMESTAMP(6)
    AND name > ? AND name LIKE CONCAT(?, '%') ORDER BY name LIMIT ?)
UNION
(SELECT name FROM `{ns}_holders` WHERE expires > UTC_TIMESTAMP(6)
    AND name > ? AND name LIKE CONCAT(?, '%') ORDER BY name LIMIT ?)
ORDER BY 1 LIMIT ?
