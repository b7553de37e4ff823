-- bury(owner)
--
-- Remembers an owner value whose release came first (see the `_gone`
-- table), for 3 minutes: a request with it that arrives later takes nothing.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_bury`(p_owner VARBINARY(400))
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    INSERT IGNORE INTO `{ns}_gone` (owner, until)
    VALUES (p_owner, UTC_TIMESTAMP(6) + INTERVAL 3 MINUTE);
END
