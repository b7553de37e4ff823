use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "pair:<first.id>")]
async fn pay((first, second): (u64, u64)) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
