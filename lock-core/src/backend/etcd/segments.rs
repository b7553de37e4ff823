//! How a striped lock's segments are stored on etcd: one key per taken
//! segment, `<base><index>`, whose value is `<of>|<owner>`.

use std::time::Duration;

use etcd_client::{Client, GetOptions};

use super::errors::bounded;
use crate::error::StoreError;

/// A segment taken: which, and its create revision.
pub(super) struct Segment {
    pub(super) stored: String,
    pub(super) index: u32,
    pub(super) revision: i64,
    pub(super) lease: i64,
}

/// The segment a stored key names (`<base><index>`).
fn segment_index(key: &[u8], base: &str) -> Option<u32> {
    std::str::from_utf8(key.strip_prefix(base.as_bytes())?)
        .ok()?
        .parse()
        .ok()
}

/// A segment value's count and holder.
fn split_value(value: &[u8]) -> (Option<u32>, &[u8]) {
    match value.iter().position(|&b| b == b'|') {
        Some(bar) => {
            let of = std::str::from_utf8(&value[..bar])
                .ok()
                .and_then(|s| s.parse().ok());
            (of, &value[bar + 1..])
        }
        None => (None, value),
    }
}

/// One stored segment: where it is, and the count and holder its value
/// names.
pub(super) struct HeldSegment {
    pub(super) segment: Segment,
    pub(super) of: Option<u32>,
    pub(super) holder: Vec<u8>,
}

/// The segments stored under `base`.
pub(super) async fn held_segments(
    client: &Client,
    timeout: Duration,
    base: &str,
) -> Result<Vec<HeldSegment>, StoreError> {
    let all = GetOptions::new().with_prefix();
    let held = bounded(timeout, false, client.clone().get(base, Some(all))).await?;
    let segments = held.kvs().iter().filter_map(|kv| {
        let index = segment_index(kv.key(), base)?;
        let (of, holder) = split_value(kv.value());
        let segment = Segment {
            stored: format!("{base}{index}"),
            index,
            revision: kv.create_revision(),
            lease: kv.lease(),
        };
        let holder = holder.to_vec();
        Some(HeldSegment {
            segment,
            of,
            holder,
        })
    });
    Ok(segments.collect())
}

/// The segment of `owner` among the stored ones, found by value (for a
/// release whose acquire's answer never arrived).
pub(super) async fn find_segment(
    client: &Client,
    timeout: Duration,
    base: &str,
    owner: &str,
) -> Result<Option<(String, i64)>, StoreError> {
    let held = held_segments(client, timeout, base).await?;
    let mine = held
        .into_iter()
        .find(|held| held.holder == owner.as_bytes());
    Ok(mine.map(|held| (held.segment.stored, held.segment.revision)))
}
