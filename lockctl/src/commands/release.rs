//! `release KEY --force`: breaks the lock, and says what it removed.

use lock_core::{LockError, Locker};

use super::show;
use crate::exit::Exit;
use crate::table::cut;

pub async fn run(locker: &Locker, key: &str) -> Result<Exit, LockError> {
    let before = locker.inspect(key).await?;
    let forced = locker.force_release(key).await?;
    if forced.removed == 0 {
        println!("{}: not held; nothing removed", cut(key, 50));
        return Ok(Exit::NotHeld);
    }
    print!("{}", show::text(&before));
    let shown = cut(key, 30);
    println!(
        "{shown}: removed {} holders and queue entries",
        forced.removed
    );
    if let Some(token) = forced.tokens_up_to {
        println!("{shown}: the next holder's token is above {token}");
    }
    Ok(Exit::Done)
}
