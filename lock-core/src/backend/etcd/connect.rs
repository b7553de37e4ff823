//! Connecting: endpoints or an `etcd://` URL, checked with one request.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, GetOptions};

use super::EtcdBackend;
use super::errors::{bounded, store_error};
use crate::error::{Refusal, StoreError};

impl EtcdBackend {
    /// Connects to the etcd members at `endpoints` (`http://host:port`; one
    /// reachable member is enough, and requests go on through the others
    /// when it fails), bounding connects and requests by `timeout`. One
    /// read checks that a member answers.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_core::backend::EtcdBackend;
    /// use std::time::Duration;
    ///
    /// let members = ["http://10.0.0.1:2379", "http://10.0.0.2:2379"];
    /// let backend = EtcdBackend::connect(&members, Duration::from_secs(2)).await?;
    /// let locker = lock_core::Locker::builder().backend(backend)?;
    /// # let _ = locker;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect(endpoints: &[&str], timeout: Duration) -> Result<Self, StoreError> {
        Self::connect_as(endpoints, None, timeout).await
    }

    /// Connects as [`connect`](Self::connect) does, to the members an
    /// `etcd://[user:password@]host:port[,host:port...]` URL names.
    pub async fn connect_url(url: &str, timeout: Duration) -> Result<Self, StoreError> {
        let (endpoints, user) = parse_url(url)?;
        let endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
        Self::connect_as(&endpoints, user, timeout).await
    }

    async fn connect_as(
        endpoints: &[&str],
        user: Option<Credentials>,
        timeout: Duration,
    ) -> Result<Self, StoreError> {
        if endpoints.is_empty() {
            let err = "no etcd endpoint given: name at least one, as http://host:port";
            return Err(StoreError::refused(Refusal::InvalidUrl, err));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_keep_alive(timeout, timeout)
            // A member cut off from its leader fails requests at once
            // instead of holding them (and watches) until the partition heals.
            .with_require_leader(true);
        if let Some((name, password)) = user {
            // etcd's auth tokens lapse; a lapsed one is fetched anew.
            options = options
                .with_user(name, password)
                .with_auto_token_refresh(true);
        }
        let connect = Client::connect(endpoints, Some(options));
        let client = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| StoreError::timed_out(timeout))?
            .map_err(|err| store_error(err, false))?;
        let probe = GetOptions::new().with_count_only();
        bounded(
            timeout,
            false,
            client
                .clone()
                .get("lock-core:connection-check", Some(probe)),
        )
        .await?;
        let description = format!("etcd {}", endpoints.join(","));
        Ok(EtcdBackend::new(client, timeout, description))
    }
}

/// A user name and password.
type Credentials = (String, String);

/// The endpoints (`http://host:port`) and credentials of an `etcd://` URL.
fn parse_url(url: &str) -> Result<(Vec<String>, Option<Credentials>), StoreError> {
    let invalid = |why: &str| {
        let message = format!("{why}: expected etcd://[user:password@]host:port[,host:port...]");
        StoreError::refused(Refusal::InvalidUrl, message)
    };
    let Some(rest) = url.strip_prefix("etcd://") else {
        return Err(invalid("not an etcd:// URL"));
    };
    let rest = rest.trim_end_matches('/');
    let (user, hosts) = match rest.rsplit_once('@') {
        Some((user, hosts)) => {
            let Some((name, password)) = user.split_once(':') else {
                return Err(invalid("credentials without a password"));
            };
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (Some((decode(name), decode(password))), hosts)
        }
        None => (None, rest),
    };
    let mut endpoints = Vec::new();
    for host in hosts.split(',') {
        let well_formed = host.rsplit_once(':').is_some_and(|(name, port)| {
            !name.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0)
        });
        if !well_formed || host.contains('/') {
            return Err(invalid(&format!("`{host}` is not host:port")));
        }
        endpoints.push(format!("http://{host}"));
    }
    Ok((endpoints, user))
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls_name_members_and_credentials() {
        let (endpoints, user) = parse_url("etcd://127.0.0.1:2379,10.0.0.2:2380").unwrap();
        assert_eq!(endpoints, ["http://127.0.0.1:2379", "http://10.0.0.2:2380"]);
        assert!(user.is_none());
        let (_, user) = parse_url("etcd://locks:p%40ss@h:1/").unwrap();
        assert_eq!(user, Some(("locks".to_owned(), "p@ss".to_owned())));
        for bad in [
            "etcd://",
            "etcd://host",
            "etcd://h:0",
            "etcd://h:1,",
            "etcd://u@h:1",
            "redis://h:1",
            "etcd://h:1/db",
        ] {
            let err = parse_url(bad).unwrap_err();
            assert!(err.refusal().is_some(), "{bad}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10_000))]

            #[test]
            fn any_url_parses_or_is_refused_without_panicking(url in "etcd://[a-z0-9:@%/,.]{0,40}|.{0,20}") {
                if let Ok((endpoints, _)) = parse_url(&url) {
                    prop_assert!(!endpoints.is_empty());
                }
            }

            #[test]
            fn members_and_credentials_are_read_back(
                hosts in proptest::collection::vec(("[a-z][a-z0-9.-]{0,12}", 1u16..), 1..4),
                user in "[a-z]{1,8}",
                password in ".{1,12}",
            ) {
                let list: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
                let encoded = percent_encoding::utf8_percent_encode(&password, percent_encoding::NON_ALPHANUMERIC);
                let (endpoints, login) = parse_url(&format!("etcd://{user}:{encoded}@{}", list.join(","))).unwrap();
                let expected: Vec<String> = list.iter().map(|h| format!("http://{h}")).collect();
                prop_assert_eq!(endpoints, expected);
                prop_assert_eq!(login, Some((user, password)));
            }
        }
    }
}
