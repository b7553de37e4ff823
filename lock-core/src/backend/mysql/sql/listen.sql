-- The statements of a wake-up connection, one per line after this header:
-- 1. subscribe: register route ?2 (a stored name, as wake hashes it) for
--    the connection ?1, or count one more subscription to it;
-- 2. heard: the connection's routes woken since it last looked, with the
--    count it then acts on;
-- 3. seen: mark the count ?1 of route ?3 of connection ?2 as acted on;
-- 4. wait: wait up to ?2 seconds for the named lock ?1, which the
--    Locker's other wake-up connection holds, unless a route of this
--    connection was woken or its bell rung since it looked (a ring's KILL
--    QUERY ends the wait early). Not SLEEP(): MariaDB's sleeps share one
--    mutex, and concurrent KILLs of sleepers stall for 2 s on it; a named
--    lock's wait is the connection's own;
-- 5. forget: remove route ?2 of connection ?1 if nobody subscribed to it
--    since generation ?3;
-- 6. routes: the connection's routes and their generations;
-- 7. gone: remove every route of an earlier connection ?1;
-- 8. gone_bell: remove the bell of an earlier connection ?1;
-- 9. bell: make this connection's bell;
-- 10. answer: acknowledge every ring of this connection's bell so far.
--
-- Placeholder, in braces below: ns (the namespace).
INSERT INTO `{ns}_sleepers` (id, route, user) VALUES (?, UNHEX(SHA2(?, 256)), SUBSTRING_INDEX(USER(), '@', 1)) ON DUPLICATE KEY UPDATE gen = gen + 1
SELECT route, woken FROM `{ns}_sleepers` WHERE id = CONNECTION_ID() AND woken <> seen
UPDATE `{ns}_sleepers` SET seen = ? WHERE id = ? AND route = ?
SELECT GET_LOCK(?, ?) FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM `{ns}_sleepers` WHERE id = CONNECTION_ID() AND woken <> seen) AND NOT EXISTS (SELECT 1 FROM `{ns}_bells` WHERE id = CONNECTION_ID() AND rung <> heard)
DELETE FROM `{ns}_sleepers` WHERE id = ? AND route = ? AND gen = ?
SELECT route, gen FROM `{ns}_sleepers` WHERE id = CONNECTION_ID()
DELETE FROM `{ns}_sleepers` WHERE id = ?
DELETE FROM `{ns}_bells` WHERE id = ?
INSERT INTO `{ns}_bells` (id, user) VALUES (CONNECTION_ID(), SUBSTRING_INDEX(USER(), '@', 1)) ON DUPLICATE KEY UPDATE heard = rung
UPDATE `{ns}_bells` SET heard = rung WHERE id = CONNECTION_ID()
