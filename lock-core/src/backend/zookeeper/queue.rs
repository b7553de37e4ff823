//! Taking a place: each acquisition creates an ephemeral sequential node
//! `<owner>-<kind>-<sequence>` under the lock's parent node, in its
//! session, and holds when the nodes before it allow: none for a plain,
//! fair or write lock, no writer for a reader, fewer than N for one of N
//! permits. The others wait their turn, fair by sequence. The owner value
//! leads the name (Curator's "protected" mode), so that a create whose
//! reply was lost is found again rather than leaked. A striped lock's
//! segment `i` is a queue of its own within the parent (`s<i>of<N>-...`),
//! taken only when it is empty.

use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, Error, MultiWriteError, MultiWriteResult};

use super::errors::bounded;
use super::parents::Parents;
use crate::backend::queued::admission;
use crate::backend::stored_keys::StoredKeys;
use crate::error::StoreError;
use crate::kind::LockKind;

/// Where a kind's nodes are, and what this acquisition's are called.
pub(super) struct Names {
    /// The parent node of the kind on the key.
    pub(super) parent: String,
    /// The start of this acquisition's node name (before the sequence).
    pub(super) prefix: String,
    /// What the held table files the acquisition under.
    pub(super) entry: String,
}

/// One child of a lock's parent: its name, and the parts of it.
pub(super) struct Child<'a> {
    pub(super) name: &'a str,
    pub(super) owner: &'a str,
    pub(super) kind: &'a str,
    pub(super) sequence: i64,
}

impl<'a> Child<'a> {
    /// Parses `<owner>-<kind>-<sequence>`; `None` for another name.
    pub(super) fn parse(name: &'a str) -> Option<Self> {
        let (rest, sequence) = name.rsplit_once('-')?;
        let (owner, kind) = rest.rsplit_once('-')?;
        Some(Child {
            name,
            owner,
            kind,
            sequence: sequence.parse().ok()?,
        })
    }
}

/// The kind tag of `kind` in node names (a segment's is made when one is
/// picked: [`segment_tag`]).
fn tag(kind: LockKind) -> String {
    match kind {
        LockKind::Read => "r".to_owned(),
        LockKind::Write => "w".to_owned(),
        LockKind::Permit { of } => format!("p{of}"),
        _ => "x".to_owned(),
    }
}

impl Names {
    /// The names of `owner`'s acquisition of `kind` on `keys`. Each kind
    /// is a lock of its own, as on Redis.
    pub(super) fn of(keys: &StoredKeys, kind: LockKind, owner: &str) -> Self {
        let stored = keys.of_kind(kind);
        // A node name holds no `/`; the escaped key holds no raw `%`, so
        // writing `/` as `%2F` keeps names apart.
        let parent = format!("/{}", stored.replace('/', "%2F"));
        let prefix = format!("{owner}-{}-", tag(kind));
        let entry = format!("{parent}/{owner}");
        Names {
            parent,
            prefix,
            entry,
        }
    }

    /// The full path of child `name`.
    pub(super) fn path(&self, name: &str) -> String {
        format!("{}/{name}", self.parent)
    }
}

/// The children of `parent` that are lock nodes, in sequence order (none if
/// the parent is gone).
pub(super) async fn children(
    client: &Client,
    timeout: Duration,
    parent: &str,
) -> Result<Vec<String>, StoreError> {
    match bounded(timeout, false, client.list_children(parent)).await {
        Ok(mut names) => {
            in_line(&mut names);
            Ok(names)
        }
        Err(err) => match zk_no_node(&err) {
            true => Ok(Vec::new()),
            false => Err(err),
        },
    }
}

/// Keeps the lock nodes of a parent's `names`, in sequence order.
pub(super) fn in_line(names: &mut Vec<String>) {
    names.retain(|name| Child::parse(name).is_some());
    names.sort_by_key(|name| Child::parse(name).map_or(0, |c| c.sequence));
}

/// Whether `err` is ZooKeeper's "no node".
pub(super) fn zk_no_node(err: &StoreError) -> bool {
    std::error::Error::source(err)
        .and_then(|source| source.downcast_ref::<Error>())
        .is_some_and(|err| matches!(err, Error::NoNode))
}

/// A node just made: its path and czxid, and whether it was made together
/// with its parent (so it is the first node the parent ever had, and
/// nothing is ahead of it).
pub(super) struct Created {
    pub(super) path: String,
    pub(super) czxid: i64,
    pub(super) with_parent: bool,
}

/// Creates `prefix` + a sequence under the parent (made in the same request
/// as a container if `parents` does not know it, or if it is missing),
/// ephemeral in `client`'s session. A create whose reply was lost is found
/// by its prefix.
pub(super) async fn create(
    client: &Client,
    timeout: Duration,
    names: &Names,
    prefix: &str,
    parents: &Parents,
) -> Result<Created, StoreError> {
    let options = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let path = names.path(prefix);
    for _ in 0..2 {
        if !parents.known(&names.parent) {
            // A new key: its parent and first node in one request (ZooKeeper
            // Rust client's multi; 2 requests fewer than a create that
            // fails, the parent's and the create again).
            let parent = CreateMode::Container.with_acls(Acls::anyone_all());
            let mut both = client.new_multi_writer();
            both.add_create(&names.parent, &[], &parent)
                .and_then(|()| both.add_create(&path, &[], &options))
                .map_err(|err| super::errors::store_error(err, false))?;
            let made = tokio::time::timeout(timeout, both.commit()).await;
            let Ok(made) = made else {
                return Err(StoreError::timed_out(timeout).unknown(true));
            };
            match made {
                Ok(results) => {
                    parents.seen(&names.parent);
                    if let Some(MultiWriteResult::Create { path, stat }) =
                        results.into_iter().nth(1)
                    {
                        // A create in a multi may answer an invalid stat
                        // (ZOOKEEPER-4026): the czxid only marks it made.
                        let czxid = stat.czxid.max(1);
                        return Ok(Created {
                            path,
                            czxid,
                            with_parent: true,
                        });
                    }
                    return Err(StoreError::in_doubt("ZooKeeper answered a multi in part"));
                }
                Err(MultiWriteError::OperationFailed {
                    index: 0,
                    source: Error::NodeExists,
                }) => {
                    parents.seen(&names.parent);
                }
                Err(MultiWriteError::RequestFailed {
                    source: Error::ConnectionLoss | Error::Custom(_),
                }) => return found_after_a_break(client, timeout, names, prefix).await,
                Err(err) => return Err(super::errors::store_error(Error::from(err), true)),
            }
        }
        let created = tokio::time::timeout(timeout, client.create(&path, &[], &options)).await;
        let Ok(created) = created else {
            // No answer in time: it may land; the caller's pending entry
            // finds it by its prefix.
            return Err(StoreError::timed_out(timeout).unknown(true));
        };
        match created {
            Ok((stat, sequence)) => {
                let path = format!("{path}{sequence}");
                return Ok(Created {
                    path,
                    czxid: stat.czxid,
                    with_parent: false,
                });
            }
            // The container went since (the server removes empty ones).
            Err(Error::NoNode) => parents.gone(&names.parent),
            Err(Error::ConnectionLoss | Error::Custom(_)) => {
                return found_after_a_break(client, timeout, names, prefix).await;
            }
            Err(err) => return Err(super::errors::store_error(err, true)),
        }
    }
    Err(StoreError::not_applied(
        "the lock's parent node vanished twice",
    ))
}

/// The node a create whose connection broke made, found by its prefix
/// (it may have landed); not known to be the parent's first.
async fn found_after_a_break(
    client: &Client,
    timeout: Duration,
    names: &Names,
    prefix: &str,
) -> Result<Created, StoreError> {
    let lost = || StoreError::in_doubt("the connection broke during a create");
    let (path, czxid) = found(client, timeout, names, prefix)
        .await?
        .ok_or_else(lost)?;
    Ok(Created {
        path,
        czxid,
        with_parent: false,
    })
}

/// The node a create with a lost reply made, if it did (`None`), or an
/// error whose outcome is unknown if the lookup failed.
pub(super) async fn found(
    client: &Client,
    timeout: Duration,
    names: &Names,
    prefix: &str,
) -> Result<Option<(String, i64)>, StoreError> {
    let children = children(client, timeout, &names.parent).await;
    let children = children.map_err(|err| err.unknown(true))?;
    let Some(name) = children.iter().find(|name| name.starts_with(prefix)) else {
        return Ok(None);
    };
    let path = names.path(name);
    match bounded(timeout, false, client.check_stat(&path)).await {
        Ok(stat) => Ok(stat.map(|stat| (path, stat.czxid))),
        Err(err) => Err(err.unknown(true)),
    }
}

/// The kind tag of segment `index` of `of`.
pub(super) fn segment_tag(index: u32, of: u32) -> String {
    format!("s{index}of{of}")
}

/// Segment index and count of a segment's kind tag.
pub(super) fn parse_segment(kind: &str) -> Option<(u32, u32)> {
    let (index, of) = kind.strip_prefix('s')?.split_once("of")?;
    Some((index.parse().ok()?, of.parse().ok()?))
}

/// Whether the node `mine` holds `kind` among the sorted `children`:
/// `Ok(None)` if it is not among them; an error if a holder uses another
/// count of permits.
pub(super) fn holds(
    children: &[String],
    mine: &str,
    kind: LockKind,
) -> Result<Option<bool>, StoreError> {
    let Some(at) = children.iter().position(|name| name == mine) else {
        return Ok(None);
    };
    if let LockKind::Permit { of } = kind {
        let holders = children
            .iter()
            .take(of as usize)
            .filter_map(|n| Child::parse(n));
        for child in holders {
            let stored = child.kind.strip_prefix('p').and_then(|n| n.parse().ok());
            if let Some(stored) = stored.filter(|&stored| stored != of) {
                return Err(StoreError::size_disagrees("permits", of, stored));
            }
        }
    }
    let ahead = children[..at].iter().filter_map(|name| Child::parse(name));
    let ahead = ahead.map(|child| match child.kind {
        "w" => LockKind::Write,
        "r" => LockKind::Read,
        _ => kind,
    });
    Ok(Some(admission::holds(kind, ahead)))
}
