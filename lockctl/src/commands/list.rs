//! `list PATTERN`: the held keys that match.

use lock_core::{LockError, Locker};

use crate::exit::Exit;
use crate::json::ListView;
use crate::output::{emit, emit_json};

/// Prints the held keys that match `pattern`, sorted, one per line (whole,
/// however long: they are what `show` takes), or as one JSON document.
pub async fn run(locker: &Locker, pattern: &str, json: bool) -> Result<Exit, LockError> {
    let mut keys = locker.held_keys(pattern).await?;
    keys.sort();
    if json {
        let pattern = pattern.to_owned();
        emit_json(&ListView { pattern, keys });
    } else {
        emit(
            &keys
                .iter()
                .map(|key| format!("{key}\n"))
                .collect::<String>(),
        );
    }
    Ok(Exit::Done)
}
