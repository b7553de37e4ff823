-- What a user needs to lock in a namespace whose DDL another user ran (a
-- DBA's migration): printed by `lockctl schema --role R`, never run by the
-- Locker. A waiter is woken at once only by releases of the same user
-- (KILL QUERY on its own connections, which needs no grant); others find
-- the release within their holder's remaining time.
--
-- Placeholders, in braces below: ns (the namespace), database (the
-- database, quoted) and role (the user, quoted).
GRANT SELECT ON {database}.`{ns}_format` TO {role};
GRANT SELECT, UPDATE ON {database}.`{ns}_tokens` TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.`{ns}_gone` TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.`{ns}_leases` TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.`{ns}_holders` TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.`{ns}_sleepers` TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON {database}.`{ns}_bells` TO {role};
GRANT CREATE TEMPORARY TABLES ON {database}.* TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_wait_ms` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_next_token` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_bury` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_wake` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_announce` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_sweep` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_acquire` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_release` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_take` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_give` TO {role};
GRANT EXECUTE ON PROCEDURE {database}.`{ns}_force_release_all` TO {role};
