//! `leader KEY`: who leads the election on it.

use lock_core::{LockError, Locker};

use crate::exit::Exit;
use crate::json::LeaderView;
use crate::output::{WIDTH, emit, emit_json};
use crate::table::cut;
use crate::text::duration_text;

/// Prints who leads the election on `key`: done (0), or not held (3) when
/// no one leads.
pub async fn run(locker: &Locker, key: &str, json: bool) -> Result<Exit, LockError> {
    let leader = locker.leader(key).await?;
    let exit = if leader.is_some() {
        Exit::Done
    } else {
        Exit::NotHeld
    };
    if json {
        emit_json(&LeaderView::new(key, leader));
        return Ok(exit);
    }
    let lines = match leader {
        None => vec![format!("{key}: no leader")],
        Some(leader) => vec![
            format!("{key}: led by {}", leader.process.as_deref().unwrap_or("?")),
            format!("  value  {}", leader.value.as_deref().unwrap_or("-")),
            format!("  token  {}", leader.token),
            format!("  left   {}", duration_text(leader.remaining)),
            format!("  owner  {}", leader.owner),
        ],
    };
    emit(
        &lines
            .iter()
            .map(|line| cut(line, WIDTH) + "\n")
            .collect::<String>(),
    );
    Ok(exit)
}
