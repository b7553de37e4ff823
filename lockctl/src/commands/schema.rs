//! `schema --role R [--mysql DATABASE]`: the DDL and grants, without
//! reaching any store.

use crate::exit::Exit;
use crate::output::{emit, report};

type Printed = Result<(String, String), Box<dyn std::error::Error>>;

/// The DDL and grants, or why not (a bad namespace, role or database name,
/// or a store this build lacks).
#[cfg_attr(
    not(all(feature = "postgres", feature = "mysql")),
    allow(unused_variables)
)]
fn printed(namespace: &str, role: &str, mysql: Option<&str>) -> Printed {
    match mysql {
        #[cfg(feature = "mysql")]
        Some(database) => Ok(lock_core::backend::MysqlBackend::schema_sql(
            namespace, database, role,
        )?),
        #[cfg(not(feature = "mysql"))]
        Some(_) => Err("this lockctl was built without the `mysql` feature".into()),
        #[cfg(feature = "postgres")]
        None => Ok(lock_core::backend::PostgresBackend::schema_sql(
            namespace, role,
        )?),
        #[cfg(not(feature = "postgres"))]
        None => Err("this lockctl was built without the `postgres` feature".into()),
    }
}

/// Prints the DDL and the grants: done (0), or refused (2) for a name the
/// store cannot take.
pub fn run(namespace: &str, role: &str, mysql: Option<&str>) -> Exit {
    match printed(namespace, role, mysql) {
        Ok((ddl, grants)) => {
            emit(&format!("{ddl}\n{grants}\n"));
            Exit::Done
        }
        Err(err) => {
            report(&*err);
            Exit::Refused
        }
    }
}
