//! Connecting: a connect string or a `zk://` URL, checked with one request.

use std::time::Duration;

use zookeeper_client::{Acls, CreateMode};

use super::errors::bounded;
use super::{LOOKUP_TTL, ZooKeeperBackend};
use crate::error::{Refusal, StoreError};

impl ZooKeeperBackend {
    /// Connects to the ZooKeeper ensemble `connect_string` names
    /// (`host:port[,host:port...][/chroot]`; one reachable server is
    /// enough, and the session moves to another when it fails), bounding
    /// connects and requests by `timeout`. A chroot that does not exist
    /// is made (a persistent node). One session is opened and one read
    /// checks that the ensemble answers.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_core::backend::ZooKeeperBackend;
    /// use std::time::Duration;
    ///
    /// let ensemble = "10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181/locks";
    /// let backend = ZooKeeperBackend::connect(ensemble, Duration::from_secs(2)).await?;
    /// let locker = lock_core::Locker::builder().backend(backend)?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(connect_string: &str, timeout: Duration) -> Result<Self, StoreError> {
        check_hosts(connect_string)?;
        if let Some(at) = connect_string.find('/') {
            let (hosts, chroot) = connect_string.split_at(at);
            let unrooted = ZooKeeperBackend::new(hosts.to_owned(), timeout);
            let session = unrooted.shared.sessions.for_ttl(LOOKUP_TTL).await?;
            let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
            bounded(timeout, true, session.client.mkdir(chroot, &options)).await?;
        }
        let backend = ZooKeeperBackend::new(connect_string.to_owned(), timeout);
        let session = backend.shared.sessions.for_ttl(LOOKUP_TTL).await?;
        bounded(timeout, false, session.client.check_stat("/")).await?;
        Ok(backend)
    }

    /// Connects as [`connect`](Self::connect) does, to the ensemble a
    /// `zk://host:port[,host:port...][/chroot]` URL names.
    pub async fn connect_url(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let Some(connect_string) = url.strip_prefix("zk://") else {
            return Err(invalid("not a zk:// URL"));
        };
        Self::connect(connect_string, timeout).await
    }
}

fn invalid(why: &str) -> StoreError {
    let message = format!("{why}: expected zk://host:port[,host:port...][/chroot]");
    StoreError::refused(Refusal::InvalidUrl, message)
}

/// Checks that `connect_string` names hosts with ports, and a chroot that
/// is a path.
fn check_hosts(connect_string: &str) -> Result<(), StoreError> {
    let (hosts, chroot) = match connect_string.find('/') {
        Some(at) => connect_string.split_at(at),
        None => (connect_string, ""),
    };
    for host in hosts.split(',') {
        let well_formed = host.rsplit_once(':').is_some_and(|(name, port)| {
            !name.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !well_formed {
            return Err(invalid(&format!("`{host}` is not host:port")));
        }
    }
    let bad_chroot = chroot.ends_with('/') || chroot.contains("//");
    if bad_chroot {
        return Err(invalid(&format!("`{chroot}` is not a chroot path")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_hosts;

    #[test]
    fn connect_strings_name_servers_and_a_chroot() {
        for good in ["127.0.0.1:2181", "a:1,b:2,c:3/locks", "h:2181/app/locks"] {
            assert!(check_hosts(good).is_ok(), "{good}");
        }
        for bad in ["", "host", "h:0", "h:1,", "h:1/", "h:1//x", "h:x"] {
            let err = check_hosts(bad).unwrap_err();
            assert!(err.refusal().is_some(), "{bad}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10_000))]

            #[test]
            fn any_connect_string_is_checked_without_panicking(hosts in "[a-z0-9:/,.é]{0,40}") {
                let _ = check_hosts(&hosts);
            }

            #[test]
            fn hosts_with_ports_and_a_chroot_pass(
                hosts in proptest::collection::vec(("[a-z][a-z0-9.-]{0,12}", 1u16..), 1..4),
                chroot in "(/[a-z0-9]{1,6}){0,3}",
            ) {
                let list: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
                let connect_string = format!("{}{chroot}", list.join(","));
                prop_assert!(check_hosts(&connect_string).is_ok(), "{}", connect_string);
            }
        }
    }
}
