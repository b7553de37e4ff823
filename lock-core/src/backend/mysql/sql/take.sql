-- take(name, owner, mode, size, ttl_ms) -> (token, place, wait_ms, queued, size)
--
-- Takes a lease of the lock `p_name` for `p_owner`, in mode `f` (fair),
-- `r`, `w` (read, write), `p` (one of `p_size` permits) or `s` (one of
-- `p_size` segments): its own again (same token, ttl from now), a new one
-- (`o_token`, and `o_place` for a segment), or none: ask again within
-- `o_wait_ms`, with a queue entry kept if `o_queued` (a fair waiter's place,
-- the first waiting writer's mark `m`, which keeps new readers out).
-- `o_size` alone: the holders use another number of permits. Decides
-- under the name's row in `_leases`, locked to the commit.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_take`(p_name VARBINARY(640), p_owner VARBINARY(400),
    p_mode CHAR(1), p_size INT, p_ttl_ms BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_until DATETIME(6);
    DECLARE v_mine_owner VARBINARY(400);
    DECLARE v_mine_token BIGINT UNSIGNED;
    DECLARE v_mine_place INT;
    DECLARE v_mine_seq BIGINT UNSIGNED;
    DECLARE v_live BIGINT;
    DECLARE v_soonest DATETIME(6);
    DECLARE v_writer DATETIME(6);
    DECLARE v_mark_owner VARBINARY(400);
    DECLARE v_mark_until DATETIME(6);
    DECLARE v_first BIGINT UNSIGNED;
    DECLARE v_least INT;
    DECLARE v_most INT;
    DECLARE o_token BIGINT UNSIGNED;
    DECLARE o_place INT;
    DECLARE o_wait_ms BIGINT;
    DECLARE o_queued BOOLEAN DEFAULT FALSE;
    DECLARE o_size INT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- One request at a time per lock: each decides on all of its rows.
    INSERT INTO `{ns}_leases` (name, owner, token, expires, taken)
    VALUES (p_name, '', 0, '1970-01-01', '1970-01-01')
    ON DUPLICATE KEY UPDATE token = token;
    decide: BEGIN
        SET v_now = UTC_TIMESTAMP(6);
        SET v_until = v_now + INTERVAL p_ttl_ms * 1000 MICROSECOND;
        IF EXISTS (SELECT 1 FROM `{ns}_gone` g WHERE g.owner = p_owner) THEN
            LEAVE decide;
        END IF;
        -- By the primary key: through the index on expires the scan would
        -- lock other names' rows, in an order that deadlocks with their
        -- requests.
        DELETE h FROM `{ns}_holders` h FORCE INDEX (PRIMARY)
         WHERE h.name = p_name AND h.expires <= v_now;
        SELECT h.owner, h.token, h.place, h.seq INTO v_mine_owner, v_mine_token, v_mine_place, v_mine_seq
          FROM `{ns}_holders` h WHERE h.name = p_name AND h.owner = p_owner;
        IF v_mine_token > 0 THEN
            UPDATE `{ns}_holders` SET expires = v_until WHERE name = p_name AND owner = p_owner;
            SET o_token = v_mine_token, o_place = v_mine_place;
            LEAVE decide;
        END IF;
        IF p_mode = 'f' THEN
            IF v_mine_owner IS NULL THEN
                CALL `{ns}_next_token`(v_mine_seq);
                INSERT INTO `{ns}_holders` (name, owner, mode, token, expires, taken, seq, place, size)
                VALUES (p_name, p_owner, 'f', 0, v_until, v_now, v_mine_seq, 0, 0);
            END IF;
            SELECT MIN(h.seq) INTO v_first FROM `{ns}_holders` h WHERE h.name = p_name;
            IF v_first = v_mine_seq THEN
                CALL `{ns}_next_token`(o_token);
                UPDATE `{ns}_holders` SET token = o_token, expires = v_until, taken = v_now
                 WHERE name = p_name AND owner = p_owner;
                LEAVE decide;
            END IF;
            UPDATE `{ns}_holders` SET expires = v_until WHERE name = p_name AND owner = p_owner;
            -- Ask again by half the entry's ttl, or when one ahead could lapse.
            SELECT MIN(h.expires) INTO v_soonest
              FROM `{ns}_holders` h WHERE h.name = p_name AND h.seq < v_mine_seq;
            CALL `{ns}_wait_ms`(v_soonest, o_wait_ms);
            SET o_queued = TRUE, o_wait_ms = LEAST(p_ttl_ms DIV 2, o_wait_ms);
            LEAVE decide;
        END IF;
        IF p_mode IN ('r', 'w') THEN
            SELECT COUNT(CASE WHEN h.mode IN ('r', 'w') THEN 1 END),
                   MAX(CASE WHEN h.mode = 'w' THEN h.expires END),
                   MIN(CASE WHEN h.mode IN ('r', 'w') THEN h.expires END)
              INTO v_live, v_writer, v_soonest
              FROM `{ns}_holders` h WHERE h.name = p_name;
            SELECT h.owner, h.expires INTO v_mark_owner, v_mark_until
              FROM `{ns}_holders` h WHERE h.name = p_name AND h.mode = 'm';
            -- Another writer's mark keeps both readers and writers out.
            IF COALESCE(v_mark_owner = p_owner, TRUE)
               AND ((p_mode = 'w' AND v_live = 0) OR (p_mode = 'r' AND v_writer IS NULL)) THEN
                CALL `{ns}_next_token`(o_token);
                INSERT INTO `{ns}_holders` (name, owner, mode, token, expires, taken, seq, place, size)
                VALUES (p_name, p_owner, p_mode, o_token, v_until, v_now, 0, 0, 0)
                ON DUPLICATE KEY UPDATE mode = VALUES(mode), token = VALUES(token),
                    expires = VALUES(expires), taken = VALUES(taken);
                LEAVE decide;
            END IF;
            IF p_mode = 'w' AND COALESCE(v_mark_owner = p_owner, TRUE) THEN
                -- The first writer to wait: new readers wait behind it.
                INSERT INTO `{ns}_holders` (name, owner, mode, token, expires, taken, seq, place, size)
                VALUES (p_name, p_owner, 'm', 0, v_until, v_now, 0, 0, 0)
                ON DUPLICATE KEY UPDATE expires = VALUES(expires);
                CALL `{ns}_wait_ms`(v_soonest, o_wait_ms);
                SET o_queued = TRUE, o_wait_ms = LEAST(p_ttl_ms DIV 2, o_wait_ms);
            ELSEIF p_mode = 'r' THEN
                CALL `{ns}_wait_ms`(COALESCE(v_writer, v_mark_until), o_wait_ms);
            ELSE
                CALL `{ns}_wait_ms`(COALESCE(v_soonest, v_mark_until), o_wait_ms);
            END IF;
            LEAVE decide;
        END IF;
        SELECT COUNT(*), MIN(h.expires), MIN(h.size), MAX(h.size)
          INTO v_live, v_soonest, v_least, v_most
          FROM `{ns}_holders` h WHERE h.name = p_name;
        IF v_live > 0 AND (v_least <> p_size OR v_most <> p_size) THEN
            SET o_size = CASE WHEN v_least <> p_size THEN v_least ELSE v_most END;
            LEAVE decide;
        END IF;
        IF v_live >= p_size THEN
            CALL `{ns}_wait_ms`(v_soonest, o_wait_ms);
            LEAVE decide;
        END IF;
        -- The lowest free segment: 0, or one past a used one (fewer are used
        -- than there are, so it is in range).
        SELECT MIN(c.place) INTO o_place
          FROM (SELECT 0 AS place UNION ALL
                SELECT h.place + 1 FROM `{ns}_holders` h WHERE h.name = p_name) c
         WHERE NOT EXISTS (SELECT 1 FROM `{ns}_holders` h
                            WHERE h.name = p_name AND h.place = c.place);
        CALL `{ns}_next_token`(o_token);
        INSERT INTO `{ns}_holders` (name, owner, mode, token, expires, taken, seq, place, size)
        VALUES (p_name, p_owner, p_mode, o_token, v_until, v_now, 0, o_place, p_size);
    END;
    COMMIT;
    SELECT CAST(o_token AS SIGNED), CAST(o_place AS SIGNED), CAST(o_wait_ms AS SIGNED),
           CAST(o_queued AS SIGNED), CAST(o_size AS SIGNED);
END
