//! `list PATTERN`: the held keys that match.

use lock_core::{LockError, Locker};

use super::print_json;
use crate::exit::Exit;
use crate::view::ListView;

pub async fn run(locker: &Locker, pattern: &str, json: bool) -> Result<Exit, LockError> {
    let mut keys = locker.held_keys(pattern).await?;
    keys.sort();
    if json {
        let pattern = pattern.to_owned();
        print_json(&ListView { pattern, keys });
    } else {
        for key in keys {
            println!("{key}");
        }
    }
    Ok(Exit::Done)
}
