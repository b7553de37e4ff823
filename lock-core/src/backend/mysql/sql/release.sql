-- release(name, owner) -> (live, sleepers)
--
-- Ends `p_owner`'s lease of `p_name`; wakes waiters if any found it held
-- (`sleepers`: the connections to interrupt, see wake). `live` if the
-- lease was live. An owner value it finds nothing of is
-- buried (an acquire with it may still be on its way), under the name's
-- row lock, which an acquire under way holds to its commit.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_release`(p_name VARBINARY(640), p_owner VARBINARY(400))
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_live BOOLEAN;
    DECLARE v_waited BOOLEAN;
    DECLARE v_sleepers TEXT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
    START TRANSACTION;
    SELECT l.expires > UTC_TIMESTAMP(6), l.waited INTO v_live, v_waited
      FROM `{ns}_leases` l WHERE l.name = p_name AND l.owner = p_owner FOR UPDATE;
    IF v_live IS NULL THEN
        INSERT INTO `{ns}_leases` (name, owner, token, expires, taken)
        VALUES (p_name, '', 0, '1970-01-01', '1970-01-01')
        ON DUPLICATE KEY UPDATE token = token;
        SELECT l.expires > UTC_TIMESTAMP(6), l.waited INTO v_live, v_waited
          FROM `{ns}_leases` l WHERE l.name = p_name AND l.owner = p_owner FOR UPDATE;
    END IF;
    IF v_live IS NOT NULL THEN
        DELETE FROM `{ns}_leases` WHERE name = p_name;
    END IF;
    IF NOT COALESCE(v_live, FALSE) THEN
        CALL `{ns}_bury`(p_owner);
    END IF;
    COMMIT;
    IF v_live AND v_waited THEN
        CALL `{ns}_wake`(p_name, v_sleepers);
    END IF;
    SELECT CAST(COALESCE(v_live, FALSE) AS SIGNED), v_sleepers;
END
