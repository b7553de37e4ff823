-- announce(route) -> sleepers
--
-- Wakes the waiters and observers of `p_route` as a release does (see
-- wake), and answers the connections to interrupt.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_announce`(p_route VARBINARY(1100))
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_sleepers TEXT;
    CALL `{ns}_wake`(p_route, v_sleepers);
    SELECT v_sleepers;
END
