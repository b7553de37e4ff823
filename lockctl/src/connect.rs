//! The Locker lockctl reads the store through: the URL, and settings that
//! keep it from changing anything.

use lock_core::Locker;

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

/// The chroot of a `zk://hosts/chroot` URL: the hosts and the path.
#[cfg_attr(not(feature = "zookeeper"), allow(dead_code))]
fn chroot_of(url: &str) -> Option<(&str, &str)> {
    let connect_string = url.strip_prefix("zk://")?;
    let at = connect_string.find('/')?;
    Some(connect_string.split_at(at))
}

/// Refuses a `zk://` URL whose chroot does not exist, which a Locker's
/// connect would make: lockctl changes nothing (a mistyped chroot is then
/// an error, not an empty store).
#[cfg(feature = "zookeeper")]
async fn chroot_exists(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let Some((hosts, chroot)) = chroot_of(url) else {
        return Ok(());
    };
    let bound = std::time::Duration::from_secs(5);
    let connect = zookeeper_client::Client::connector()
        .with_connection_timeout(bound)
        .connect(hosts);
    let timed_out = || format!("ZooKeeper at {hosts} did not answer within {bound:?}");
    let client = tokio::time::timeout(bound, connect)
        .await
        .map_err(|_| timed_out())??;
    let found = tokio::time::timeout(bound, client.check_stat(chroot)).await;
    match found.map_err(|_| timed_out())?? {
        Some(_) => Ok(()),
        None => Err(format!(
            "ZooKeeper at {hosts} has no chroot `{chroot}`: check the URL (lockctl makes none)"
        )
        .into()),
    }
}

/// A Locker labelled `lockctl` on the store at `url`, in `namespace`.
pub async fn locker(url: &str, namespace: &str) -> Result<Locker, Box<dyn std::error::Error>> {
    #[cfg(feature = "zookeeper")]
    chroot_exists(url).await?;
    let locker = Locker::builder()
        .label("lockctl")
        .namespace(namespace)
        .connect(&without_schema_changes(url))
        .await?;
    Ok(locker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zookeeper_url_names_its_chroot() {
        assert_eq!(
            chroot_of("zk://h:2181,g:2181/locks"),
            Some(("h:2181,g:2181", "/locks"))
        );
        assert_eq!(chroot_of("zk://h:2181"), None);
        assert_eq!(chroot_of("redis://h/0"), None);
    }

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
