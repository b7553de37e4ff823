-- The namespace's schema and tables, made once (`IF NOT EXISTS`):
--   format   one row: the format version
--   tokens   the sequence every token is drawn from
--   gone     owner values whose release came first
--   leases   one row per held plain lock
--   holders  one row per holder or queue entry of the other kinds
--
-- Placeholders, in braces below: schema (the namespace's schema, quoted),
-- format (the format version).
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.format (
    version integer NOT NULL,
    one boolean PRIMARY KEY DEFAULT true CHECK (one)
);
INSERT INTO {schema}.format (version) VALUES ({format}) ON CONFLICT DO NOTHING;
CREATE SEQUENCE IF NOT EXISTS {schema}.tokens;
-- Owner values whose release came first: a request with one of them
-- that reaches the server later (held up in a pooler's queue, or on
-- another connection) takes nothing. Kept longer than a request is held
-- up (a pooler's query_wait_timeout is 120 s by default).
CREATE TABLE IF NOT EXISTS {schema}.gone (
    owner text PRIMARY KEY,
    until timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS gone_until ON {schema}.gone (until);
CREATE TABLE IF NOT EXISTS {schema}.leases (
    name text PRIMARY KEY,
    owner text NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    taken timestamptz NOT NULL,
    waited boolean NOT NULL DEFAULT false
);
CREATE TABLE IF NOT EXISTS {schema}.holders (
    name text NOT NULL,
    owner text NOT NULL,
    mode text NOT NULL,
    token bigint NOT NULL,
    expires timestamptz NOT NULL,
    taken timestamptz NOT NULL,
    seq bigint NOT NULL,
    place integer NOT NULL,
    size integer NOT NULL,
    PRIMARY KEY (name, owner)
);
