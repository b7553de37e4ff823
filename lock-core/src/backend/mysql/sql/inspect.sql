-- The live holders and queue entries of the plain lock ?1 and of the locks
-- ?2 to ?5 (the key's other kinds), one row each: mode (`x` for the plain
-- lock, `m` for a waiting writer's mark), owner, token (0 for a queue
-- entry), ms left, ms since taken, segment, size, seq (a fair queue
-- entry's place in line), and whether a waiter marked the plain lock's
-- lease (1). It only reads.
--
-- Placeholder, in braces below: ns (the namespace).
SELECT 'x', owner, CAST(token AS SIGNED),
       CAST(CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires) / 1000) AS SIGNED),
       CAST(TIMESTAMPDIFF(MICROSECOND, taken, UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED), 0, 0,
       0, CAST(waited AS SIGNED)
  FROM `{ns}_leases` WHERE name = ? AND expires > UTC_TIMESTAMP(6)
UNION ALL
SELECT mode, owner, CAST(token AS SIGNED),
       CAST(CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires) / 1000) AS SIGNED),
       CAST(TIMESTAMPDIFF(MICROSECOND, taken, UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED),
       CAST(place AS SIGNED), CAST(size AS SIGNED), CAST(seq AS SIGNED), 0
  FROM `{ns}_holders` WHERE name IN (?, ?, ?, ?) AND expires > UTC_TIMESTAMP(6)
