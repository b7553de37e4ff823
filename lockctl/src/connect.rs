//! The Locker lockctl reads the store through: the URL, and settings that
//! keep it from changing anything.

use lock_core::{LockError, Locker};

/// The store's URL: `--url`, else `LOCK_URL` (both through clap), else
/// `REDIS_URL`.
pub fn url(given: Option<String>) -> Option<String> {
    given.or_else(|| std::env::var("REDIS_URL").ok())
}

/// `url` with `create_schema=false` on a SQL store's URL, whatever it
/// said: lockctl never makes tables (a missing table is an error that
/// names `lockctl schema`).
fn without_schema_changes(url: &str) -> String {
    let sql = ["postgres://", "postgresql://", "mysql://", "mariadb://"];
    if !sql.iter().any(|scheme| url.starts_with(scheme)) {
        return url.to_owned();
    }
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut settings: Vec<&str> = query
        .split('&')
        .filter(|setting| !setting.is_empty() && !setting.starts_with("create_schema="))
        .collect();
    settings.push("create_schema=false");
    format!("{base}?{}", settings.join("&"))
}

/// A Locker labelled `lockctl` on the store at `url`, in `namespace`.
pub async fn locker(url: &str, namespace: &str) -> Result<Locker, LockError> {
    Locker::builder()
        .label("lockctl")
        .namespace(namespace)
        .connect(&without_schema_changes(url))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_urls_make_no_tables() {
        assert_eq!(
            without_schema_changes("postgres://u@h/db"),
            "postgres://u@h/db?create_schema=false"
        );
        assert_eq!(
            without_schema_changes("mysql://u@h/db?ssl-mode=disabled"),
            "mysql://u@h/db?ssl-mode=disabled&create_schema=false"
        );
        assert_eq!(
            without_schema_changes("postgres://u@h/db?create_schema=true&x=1"),
            "postgres://u@h/db?x=1&create_schema=false"
        );
        assert_eq!(without_schema_changes("redis://h"), "redis://h");
    }
}
