-- give(name, owner) -> (live, sleepers)
--
-- Ends `p_owner`'s lease or queue entry on the lock `p_name`, and wakes the
-- waiters that may now go on, and only them: while a writer's mark stands,
-- that writer once the last holder is gone; the next in a fair queue when
-- the first place was freed; else the lock's waiters, when a writer or a
-- permit leaves, the last reader leaves, or a mark is withdrawn
-- (`sleepers`: the connections to interrupt, see wake). `live` if the
-- lease or entry was live.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_give`(p_name VARBINARY(640), p_owner VARBINARY(400))
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_mode CHAR(1);
    DECLARE v_live BOOLEAN;
    DECLARE v_seq BIGINT UNSIGNED;
    DECLARE v_token BIGINT UNSIGNED;
    DECLARE v_next VARBINARY(400);
    DECLARE v_holders BOOLEAN;
    DECLARE v_route VARBINARY(1100);
    DECLARE v_sleepers TEXT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    INSERT INTO `{ns}_leases` (name, owner, token, expires, taken)
    VALUES (p_name, '', 0, '1970-01-01', '1970-01-01')
    ON DUPLICATE KEY UPDATE token = token;
    SET v_now = UTC_TIMESTAMP(6);
    SELECT h.mode, h.expires > v_now, h.seq, h.token INTO v_mode, v_live, v_seq, v_token
      FROM `{ns}_holders` h WHERE h.name = p_name AND h.owner = p_owner;
    DELETE FROM `{ns}_holders` WHERE name = p_name AND owner = p_owner;
    -- A queue entry is asked for again and again: one of those requests
    -- may still be on its way.
    IF NOT COALESCE(v_live AND v_token > 0, FALSE) THEN
        CALL `{ns}_bury`(p_owner);
    END IF;
    decide: BEGIN
        IF NOT COALESCE(v_live, FALSE) THEN
            LEAVE decide;
        END IF;
        IF v_mode = 'f' THEN
            IF NOT EXISTS (SELECT 1 FROM `{ns}_holders` h
                            WHERE h.name = p_name AND h.expires > v_now AND h.seq < v_seq) THEN
                SELECT h.owner INTO v_next FROM `{ns}_holders` h
                 WHERE h.name = p_name AND h.expires > v_now ORDER BY h.seq LIMIT 1;
                IF v_next IS NOT NULL THEN
                    SET v_route = CONCAT(p_name, ' ', v_next);
                END IF;
            END IF;
            LEAVE decide;
        END IF;
        SET v_holders = EXISTS (SELECT 1 FROM `{ns}_holders` h WHERE h.name = p_name
                                   AND h.expires > v_now AND h.mode IN ('r', 'w'));
        IF v_mode = 'm' THEN
            IF NOT EXISTS (SELECT 1 FROM `{ns}_holders` h WHERE h.name = p_name
                              AND h.expires > v_now AND h.mode = 'w') THEN
                SET v_route = p_name;
            END IF;
            LEAVE decide;
        END IF;
        SELECT h.owner INTO v_next FROM `{ns}_holders` h
         WHERE h.name = p_name AND h.expires > v_now AND h.mode = 'm';
        IF v_next IS NOT NULL THEN
            IF NOT v_holders THEN
                SET v_route = CONCAT(p_name, ' ', v_next);
            END IF;
        ELSEIF v_mode <> 'r' OR NOT v_holders THEN
            SET v_route = p_name;
        END IF;
    END;
    COMMIT;
    IF v_route IS NOT NULL THEN
        CALL `{ns}_wake`(v_route, v_sleepers);
    END IF;
    SELECT CAST(COALESCE(v_live, FALSE) AS SIGNED), v_sleepers;
END
