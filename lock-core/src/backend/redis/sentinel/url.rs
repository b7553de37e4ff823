//! `redis+sentinel://` URLs.

use percent_encoding::percent_decode_str;

use crate::error::{Refusal, StoreError};

/// Port of a sentinel named without one.
const SENTINEL_PORT: u16 = 26379;

/// Where a `redis+sentinel://` URL points: the sentinels, the master's
/// name, and how to log in to the master.
#[derive(Debug, Clone)]
pub(in crate::backend::redis) struct SentinelUrl {
    pub(in crate::backend::redis) sentinels: Vec<String>,
    pub(in crate::backend::redis) master: String,
    pub(in crate::backend::redis) login: redis::RedisConnectionInfo,
}

impl SentinelUrl {
    /// Parses `redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db]`.
    pub(in crate::backend::redis) fn parse(url: &str) -> Result<Self, StoreError> {
        let invalid = |why: &str| {
            let reason = format!(
                "{why}: expected redis+sentinel://[user:password@]host:port[,host:port...]/master-name[/db]"
            );
            StoreError::refused(Refusal::InvalidUrl, reason)
        };
        let rest = url
            .split_once("://")
            .map(|(_, rest)| rest)
            .ok_or_else(|| invalid("no scheme"))?;
        if rest.contains(['?', '#']) {
            return Err(invalid("no query or fragment is read"));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let sentinels = hosts
            .split(',')
            .filter(|host| !host.is_empty())
            .map(|host| match has_port(host) {
                true => format!("redis://{host}"),
                false => format!("redis://{host}:{SENTINEL_PORT}"),
            })
            .collect::<Vec<_>>();
        if sentinels.is_empty() {
            return Err(invalid("no sentinel host"));
        }
        let mut segments = path.split('/').filter(|s| !s.is_empty());
        let master = segments
            .next()
            .ok_or_else(|| invalid("no master name"))?
            .to_owned();
        let mut login = redis::RedisConnectionInfo::default();
        if let Some(db) = segments.next() {
            let db = db
                .parse()
                .map_err(|_| invalid("the database is not a number"))?;
            login = login.set_db(db);
        }
        if segments.next().is_some() {
            return Err(invalid("more path than master name and database"));
        }
        if let Some(userinfo) = userinfo {
            let decoded = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            if !user.is_empty() {
                login = login.set_username(decoded(user));
            }
            if !password.is_empty() {
                login = login.set_password(decoded(password));
            }
        }
        Ok(SentinelUrl {
            sentinels,
            master,
            login,
        })
    }

    /// A client for each sentinel; a URL that does not parse, or is not
    /// `redis://` (a sentinel is reached without TLS), is refused by name.
    pub(in crate::backend::redis) fn clients(&self) -> Result<Vec<redis::Client>, StoreError> {
        let clients = self.sentinels.iter().map(|url| {
            let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
            if !matches!(scheme.to_ascii_lowercase().as_str(), "redis" | "valkey") {
                let reason = format!("sentinel {url}: sentinels are reached over redis://");
                return Err(StoreError::refused(
                    Refusal::UnsupportedScheme(scheme.to_owned()),
                    reason,
                ));
            }
            redis::Client::open(url.as_str()).map_err(|err| {
                StoreError::refused(Refusal::InvalidUrl, format!("sentinel {url}: {err}"))
            })
        });
        if self.sentinels.is_empty() {
            let reason = "no sentinel URL given";
            return Err(StoreError::refused(Refusal::InvalidUrl, reason));
        }
        clients.collect()
    }
}

/// Whether `host` (`name`, `name:port`, `[v6]`, `[v6]:port`) names a port.
fn has_port(host: &str) -> bool {
    let after_address = host.rsplit_once(']').map_or(host, |(_, rest)| rest);
    after_address.contains(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_sentinels_master_and_login() {
        let url = SentinelUrl::parse("redis+sentinel://app:p%40ss@a:1,b/mymaster/3").unwrap();
        assert_eq!(url.sentinels, ["redis://a:1", "redis://b:26379"]);
        assert_eq!(url.master, "mymaster");
        assert_eq!(url.login.db(), 3);
        assert_eq!(url.login.username(), Some("app"));
        assert_eq!(url.login.password(), Some("p@ss"));
        let v6 = SentinelUrl::parse("redis+sentinel://[::1],[::1]:5/m").unwrap();
        assert_eq!(v6.sentinels, ["redis://[::1]:26379", "redis://[::1]:5"]);
        for bad in [
            "redis+sentinel://a:1",
            "redis+sentinel:///m",
            "redis+sentinel://a/m/x",
            "redis+sentinel://a/m/0/more",
            "redis+sentinel://a/m?password=x",
        ] {
            let err = SentinelUrl::parse(bad).unwrap_err();
            assert_eq!(err.refusal(), Some(&Refusal::InvalidUrl), "{bad}");
        }
    }

    mod properties {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(10_000))]

            #[test]
            fn any_url_parses_or_is_refused_without_panicking(url in "redis\\+sentinel://[a-z0-9:@%/,\\[\\]?.]{0,40}") {
                if let Err(err) = SentinelUrl::parse(&url) {
                    prop_assert_eq!(err.refusal(), Some(&Refusal::InvalidUrl));
                }
            }

            #[test]
            fn sentinels_and_the_master_are_read_back(
                hosts in proptest::collection::vec(("[a-z][a-z0-9.-]{0,12}", 1u16..), 1..4),
                master in "[a-zA-Z0-9_-]{1,12}",
            ) {
                let list: Vec<String> = hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
                let url = SentinelUrl::parse(&format!("redis+sentinel://{}/{master}", list.join(","))).unwrap();
                let expected: Vec<String> = list.iter().map(|h| format!("redis://{h}")).collect();
                prop_assert_eq!(url.sentinels, expected);
                prop_assert_eq!(url.master, master);
            }
        }
    }
}
