-- force_release_all(lease, fair, rw, permits, segments)
--     -> (removed, up_to, sleepers)
--
-- Removes every holder and queue entry of the plain lock `p_lease` and of
-- the key's locks of the other kinds, for an operator breaking a wedged
-- lock, and wakes every waiter (after the commit: none is granted before
-- all are gone). The number of live ones removed, the highest token among
-- them (0 for none), and the connections to interrupt (see wake).
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_force_release_all`(p_lease VARBINARY(640),
    p_fair VARBINARY(640), p_rw VARBINARY(640), p_permits VARBINARY(640),
    p_segments VARBINARY(640))
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_removed BIGINT;
    DECLARE v_up_to BIGINT UNSIGNED;
    DECLARE v_name VARBINARY(640);
    DECLARE v_owner VARBINARY(400);
    DECLARE v_woken TEXT;
    DECLARE v_sleepers TEXT DEFAULT '';
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE v_entries CURSOR FOR
        SELECT w.name, w.owner FROM lock_core_woken w;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        DROP TEMPORARY TABLE IF EXISTS lock_core_woken;
        RESIGNAL;
    END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    -- Every kind's row lock first, in one order (so that two of these
    -- cannot deadlock; a request takes one): no grant of any kind comes
    -- between the deletes below.
    INSERT INTO `{ns}_leases` (name, owner, token, expires, taken)
    VALUES (p_lease, '', 0, '1970-01-01', '1970-01-01'),
           (p_fair, '', 0, '1970-01-01', '1970-01-01'),
           (p_rw, '', 0, '1970-01-01', '1970-01-01'),
           (p_permits, '', 0, '1970-01-01', '1970-01-01'),
           (p_segments, '', 0, '1970-01-01', '1970-01-01')
    ON DUPLICATE KEY UPDATE token = token;
    SELECT COUNT(*), COALESCE(MAX(l.token), 0) INTO v_removed, v_up_to
      FROM `{ns}_leases` l WHERE l.name = p_lease AND l.expires > UTC_TIMESTAMP(6);
    DELETE FROM `{ns}_leases` WHERE name = p_lease;
    -- The queue entries, each woken on its own route once they are gone.
    CREATE TEMPORARY TABLE lock_core_woken ENGINE = MEMORY
        SELECT h.name, h.owner FROM `{ns}_holders` h
         WHERE h.name IN (p_fair, p_rw, p_permits, p_segments)
           AND h.token = 0 AND h.expires > UTC_TIMESTAMP(6);
    SELECT v_removed + COUNT(*), GREATEST(v_up_to, COALESCE(MAX(h.token), 0))
      INTO v_removed, v_up_to
      FROM `{ns}_holders` h
     WHERE h.name IN (p_fair, p_rw, p_permits, p_segments) AND h.expires > UTC_TIMESTAMP(6);
    DELETE FROM `{ns}_holders` WHERE name IN (p_fair, p_rw, p_permits, p_segments);
    COMMIT;
    CALL `{ns}_wake`(p_lease, v_woken);
    SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    CALL `{ns}_wake`(p_fair, v_woken);
    SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    CALL `{ns}_wake`(p_rw, v_woken);
    SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    CALL `{ns}_wake`(p_permits, v_woken);
    SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    CALL `{ns}_wake`(p_segments, v_woken);
    SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    OPEN v_entries;
    entries: LOOP
        FETCH v_entries INTO v_name, v_owner;
        IF v_done THEN
            LEAVE entries;
        END IF;
        CALL `{ns}_wake`(CONCAT(v_name, ' ', v_owner), v_woken);
        SET v_sleepers = CONCAT_WS(',', v_sleepers, v_woken);
    END LOOP;
    CLOSE v_entries;
    DROP TEMPORARY TABLE lock_core_woken;
    SELECT CAST(v_removed AS SIGNED), CAST(v_up_to AS SIGNED), v_sleepers;
END
