-- The namespace's tables, made once (`IF NOT EXISTS`), each named after
-- the namespace:
--   _format    one row: the format version
--   _tokens    one row: the last token drawn
--   _gone      owner values whose release came first
--   _leases    one row per lock name: the plain lock's lease, and for the
--              other kinds the row their requests lock first
--   _holders   one row per holder or queue entry of the other kinds
--   _sleepers  the waiters' wake-up connections and the locks they wait
--              for
--   _bells     one row per wake-up connection: rings, and rings heard
--
-- Names are VARBINARY: keys that differ in case, a trailing space or an
-- accent are different locks. Times are UTC_TIMESTAMP(6) values.
--
-- Placeholders, in braces below: ns (the namespace), format (the format
-- version).
CREATE TABLE IF NOT EXISTS `{ns}_format` (
    one TINYINT PRIMARY KEY,
    version INT NOT NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO `{ns}_format` (one, version) VALUES (1, {format});
CREATE TABLE IF NOT EXISTS `{ns}_tokens` (
    one TINYINT PRIMARY KEY,
    last BIGINT UNSIGNED NOT NULL
) ENGINE = InnoDB;
INSERT IGNORE INTO `{ns}_tokens` (one, last) VALUES (1, 0);
CREATE TABLE IF NOT EXISTS `{ns}_gone` (
    owner VARBINARY(400) PRIMARY KEY,
    until DATETIME(6) NOT NULL,
    KEY (until)
) ENGINE = InnoDB;
CREATE TABLE IF NOT EXISTS `{ns}_leases` (
    name VARBINARY(640) PRIMARY KEY,
    owner VARBINARY(400) NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    expires DATETIME(6) NOT NULL,
    taken DATETIME(6) NOT NULL,
    waited BOOLEAN NOT NULL DEFAULT FALSE,
    KEY (expires)
) ENGINE = InnoDB;
CREATE TABLE IF NOT EXISTS `{ns}_holders` (
    name VARBINARY(640) NOT NULL,
    owner VARBINARY(400) NOT NULL,
    mode CHAR(1) NOT NULL,
    token BIGINT UNSIGNED NOT NULL,
    expires DATETIME(6) NOT NULL,
    taken DATETIME(6) NOT NULL,
    seq BIGINT UNSIGNED NOT NULL,
    place INT NOT NULL,
    size INT NOT NULL,
    PRIMARY KEY (name, owner),
    KEY (expires)
) ENGINE = InnoDB;
-- id: the wake-up connection's CONNECTION_ID(), of the user `user`;
-- route: SHA-256 of the stored name, or of the name, a space and an owner
-- value where one waiter is woken alone. woken counts wake-ups; seen is
-- the count the connection has acted on; gen counts subscriptions, so
-- that a stale row is removed only if nobody subscribed again. InnoDB:
-- the sleeping statement reads it without a lock.
CREATE TABLE IF NOT EXISTS `{ns}_sleepers` (
    id BIGINT UNSIGNED NOT NULL,
    route BINARY(32) NOT NULL,
    user VARCHAR(128) NOT NULL,
    woken BIGINT UNSIGNED NOT NULL DEFAULT 0,
    seen BIGINT UNSIGNED NOT NULL DEFAULT 0,
    gen BIGINT UNSIGNED NOT NULL DEFAULT 0,
    PRIMARY KEY (id, route),
    KEY (route)
) ENGINE = InnoDB;
-- One row per wake-up connection `id` of the user `user`: `rung` counts
-- the wake-ups that interrupted (or will find) its sleep, `heard` the
-- count it has acknowledged. A waker rings only when the two are equal, so
-- that one KILL QUERY at a time reaches a connection (concurrent ones can
-- hold each other up for seconds).
CREATE TABLE IF NOT EXISTS `{ns}_bells` (
    id BIGINT UNSIGNED PRIMARY KEY,
    user VARCHAR(128) NOT NULL,
    rung BIGINT UNSIGNED NOT NULL DEFAULT 0,
    heard BIGINT UNSIGNED NOT NULL DEFAULT 0
) ENGINE = InnoDB;
