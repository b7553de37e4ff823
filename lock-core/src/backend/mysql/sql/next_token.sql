-- next_token(OUT token)
--
-- Draws the next token: one more than the last, which stays locked to the
-- commit, so that a grant that commits later draws a greater token.
--
-- Placeholder, in braces below: ns (the namespace).
CREATE OR REPLACE PROCEDURE `{ns}_next_token`(OUT o_token BIGINT UNSIGNED)
    MODIFIES SQL DATA SQL SECURITY INVOKER
BEGIN
    UPDATE `{ns}_tokens` SET last = last + 1 WHERE one = 1;
    SELECT last INTO o_token FROM `{ns}_tokens` WHERE one = 1;
END
