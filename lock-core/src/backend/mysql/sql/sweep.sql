-- sweep() -> rows removed
--
-- Removes rows that ended a minute ago or more and that no later request
-- on their name removed (a key nobody locks again), at most 1000 of each
-- table per call, and the rows of this user's wake-up connections that
-- ended; each Locker calls it about once a minute. A name's row in
-- `_leases` goes only without holders of its own.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_sweep`()
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_swept BIGINT DEFAULT 0;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    DELETE FROM `{ns}_holders` WHERE expires < UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE LIMIT 1000;
    SET v_swept = v_swept + ROW_COUNT();
    DELETE FROM `{ns}_leases`
     WHERE expires < UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE
       AND NOT EXISTS (SELECT 1 FROM `{ns}_holders` h WHERE h.name = `{ns}_leases`.name)
     LIMIT 1000;
    SET v_swept = v_swept + ROW_COUNT();
    DELETE FROM `{ns}_gone` WHERE until < UTC_TIMESTAMP(6) LIMIT 1000;
    SET v_swept = v_swept + ROW_COUNT();
    -- Wake-up connections of this user that ended (a process that
    -- crashed): the process list shows every connection of the user.
    DELETE FROM `{ns}_sleepers`
     WHERE user = SUBSTRING_INDEX(USER(), '@', 1)
       AND id NOT IN (SELECT p.ID FROM information_schema.PROCESSLIST p)
     LIMIT 1000;
    SET v_swept = v_swept + ROW_COUNT();
    DELETE FROM `{ns}_bells`
     WHERE user = SUBSTRING_INDEX(USER(), '@', 1)
       AND id NOT IN (SELECT p.ID FROM information_schema.PROCESSLIST p)
     LIMIT 1000;
    SELECT CAST(v_swept + ROW_COUNT() AS SIGNED);
END
