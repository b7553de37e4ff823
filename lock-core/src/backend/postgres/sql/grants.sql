-- What a role needs to lock in a namespace whose DDL another role ran (a
-- DBA's migration): printed by `lockctl schema --role R`, never run by the
-- Locker.
--
-- Placeholders, in braces below: schema (the namespace's schema) and role,
-- both quoted.
GRANT USAGE ON SCHEMA {schema} TO {role};
GRANT SELECT ON {schema}.format TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.leases, {schema}.holders, {schema}.gone TO {role};
GRANT USAGE ON SEQUENCE {schema}.tokens TO {role};
GRANT EXECUTE ON FUNCTION {schema}.ms(interval), {schema}.wait_ms(timestamptz), {schema}.bury(text),
    {schema}.read_committed(), {schema}.sweep(), {schema}.acquire(text, text, bigint),
    {schema}.release(text, text), {schema}.take(text, text, text, integer, bigint),
    {schema}.give(text, text), {schema}.force_release_all(text, text[]) TO {role};
-- Behind a transaction pooler, the role's sessions must read committed:
-- ALTER ROLE {role} SET default_transaction_isolation = 'read committed';
