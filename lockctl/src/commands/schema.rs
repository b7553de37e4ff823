//! `schema --role R [--mysql DATABASE]`: the DDL and grants, without
//! reaching any store.

use crate::exit::Exit;

use super::report;

type Printed = Result<(String, String), Box<dyn std::error::Error>>;

/// The DDL and grants, or why not (a bad namespace, role or database name,
/// or a store this build lacks).
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

pub fn run(namespace: &str, role: &str, mysql: Option<&str>) -> Exit {
    match printed(namespace, role, mysql) {
        Ok((ddl, grants)) => {
            println!("{ddl}\n{grants}");
            Exit::Done
        }
        Err(err) => {
            report(&*err);
            Exit::Refused
        }
    }
}
