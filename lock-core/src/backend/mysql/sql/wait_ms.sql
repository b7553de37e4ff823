-- wait_ms(until, OUT ms)
--
-- How long a waiter sleeps before it asks again for a lock held until
-- `p_until`: the time left in whole milliseconds, rounded up (0 for a
-- time past; NULL for NULL: nothing to say).
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_wait_ms`(p_until DATETIME(6), OUT o_ms BIGINT)
    NO SQL SQL SECURITY INVOKER
BEGIN
    SET o_ms = GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), p_until) / 1000));
END
