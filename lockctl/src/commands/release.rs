//! `release KEY --force`: breaks the lock, and says what it removed.

use lock_core::{LockError, Locker};

use super::show;
use crate::exit::Exit;
use crate::output::{WIDTH, emit};
use crate::table::cut;

/// Removes every holder and queue entry of `key` and prints what was there
/// just before, and what was removed: done (0), or not held (3) when
/// nothing was.
pub async fn run(locker: &Locker, key: &str) -> Result<Exit, LockError> {
    let before = locker.inspect(key).await?;
    let forced = locker.force_release(key).await?;
    let shown = cut(key, WIDTH / 2);
    if forced.removed == 0 {
        emit(&format!("{shown}: not held; nothing removed\n"));
        return Ok(Exit::NotHeld);
    }
    let mut out = show::text(&before);
    out.push_str(&format!(
        "{shown}: removed {} holders and queue entries\n",
        forced.removed
    ));
    if let Some(token) = forced.tokens_up_to {
        out.push_str(&format!("every later holder's token is above {token}\n"));
    }
    emit(&out);
    Ok(Exit::Done)
}
