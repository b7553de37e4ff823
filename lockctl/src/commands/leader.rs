//! `leader KEY`: who leads the election on it.

use lock_core::{LockError, Locker};

use super::print_json;
use crate::exit::Exit;
use crate::view::{LeaderView, duration_text};

pub async fn run(locker: &Locker, key: &str, json: bool) -> Result<Exit, LockError> {
    let leader = locker.leader(key).await?;
    let exit = if leader.is_some() {
        Exit::Done
    } else {
        Exit::NotHeld
    };
    if json {
        print_json(&LeaderView::new(key, leader));
        return Ok(exit);
    }
    let Some(leader) = leader else {
        println!("{key}: no leader");
        return Ok(exit);
    };
    let process = leader.process.as_deref().unwrap_or("?");
    println!("{key}: led by {process}");
    println!("  value  {}", leader.value.as_deref().unwrap_or("-"));
    println!("  token  {}", leader.token);
    println!("  left   {}", duration_text(leader.remaining));
    println!("  owner  {}", leader.owner);
    Ok(exit)
}
