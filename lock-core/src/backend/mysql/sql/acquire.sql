-- acquire(name, owner, ttl_ms) -> (token, remaining_ms)
--
-- Takes the lease of `p_name` for `p_owner`: a new one, its own again
-- (same token, ttl from now), or none: `remaining_ms` of the holder's.
-- Every request on a name first locks the name's row (made if missing),
-- held to the commit, so a later grant draws a later token.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_acquire`(p_name VARBINARY(640), p_owner VARBINARY(400),
    p_ttl_ms BIGINT)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_owner VARBINARY(400);
    DECLARE v_expires DATETIME(6);
    DECLARE v_waited BOOLEAN;
    DECLARE o_token BIGINT UNSIGNED;
    DECLARE o_remaining_ms BIGINT;
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
    decide: BEGIN
        IF EXISTS (SELECT 1 FROM `{ns}_gone` g WHERE g.owner = p_owner) THEN
            SET o_remaining_ms = 0;
            LEAVE decide;
        END IF;
        SELECT l.owner, l.expires, l.waited INTO v_owner, v_expires, v_waited
          FROM `{ns}_leases` l WHERE l.name = p_name FOR UPDATE;
        SET v_now = UTC_TIMESTAMP(6);
        IF v_owner = p_owner AND v_expires > v_now THEN
            UPDATE `{ns}_leases` SET expires = v_now + INTERVAL p_ttl_ms * 1000 MICROSECOND
             WHERE name = p_name;
            SELECT l.token INTO o_token FROM `{ns}_leases` l WHERE l.name = p_name;
        ELSEIF v_expires <= v_now THEN
            CALL `{ns}_next_token`(o_token);
            UPDATE `{ns}_leases`
               SET owner = p_owner, token = o_token, taken = v_now, waited = FALSE,
                   expires = v_now + INTERVAL p_ttl_ms * 1000 MICROSECOND
             WHERE name = p_name;
        ELSE
            IF NOT v_waited THEN
                UPDATE `{ns}_leases` SET waited = TRUE WHERE name = p_name;
            END IF;
            CALL `{ns}_wait_ms`(v_expires, o_remaining_ms);
        END IF;
    END;
    COMMIT;
    SELECT CAST(o_token AS SIGNED), CAST(o_remaining_ms AS SIGNED);
END
