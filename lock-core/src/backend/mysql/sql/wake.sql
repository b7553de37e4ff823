-- wake(route, OUT sleepers)
--
-- Counts a wake-up on the rows of the waiters of `p_route` (a stored name,
-- or a name, a space and an owner value), each committed at once, and
-- answers the ids of the connections the caller interrupts with KILL
-- QUERY, which holds no data and ends nothing but their wait (`SELECT
-- GET_LOCK` of a lock their Locker holds).
-- For each connection it rings its bell if no ring is unheard: a
-- connection never sleeps with an unheard ring or an unread count, so one
-- found asleep after the ring (in the process list, which shows this
-- user's connections only) is interrupted, and one not asleep yet finds
-- the count before it sleeps. Called after the commit, so that a woken
-- waiter finds the release done.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_wake`(p_route VARBINARY(1100), OUT o_sleepers TEXT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_route BINARY(32) DEFAULT UNHEX(SHA2(p_route, 256));
    DECLARE v_id BIGINT UNSIGNED;
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE v_rows CURSOR FOR SELECT s.id FROM `{ns}_sleepers` s WHERE s.route = v_route;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
    OPEN v_rows;
    counted: LOOP
        FETCH v_rows INTO v_id;
        IF v_done THEN
            LEAVE counted;
        END IF;
        -- Row by row, each by its primary key: one row lock at a time, so
        -- that no two statements on these tables wait for each other.
        UPDATE `{ns}_sleepers` SET woken = woken + 1 WHERE id = v_id AND route = v_route;
        UPDATE `{ns}_bells` SET rung = rung + 1 WHERE id = v_id AND rung = heard;
        IF ROW_COUNT() = 1 AND EXISTS (SELECT 1 FROM information_schema.PROCESSLIST p
                                        WHERE p.ID = v_id AND p.INFO LIKE 'SELECT GET_LOCK(%') THEN
            SET o_sleepers = CONCAT_WS(',', o_sleepers, v_id);
        END IF;
    END LOOP;
    CLOSE v_rows;
END
