use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "order:<id>", wait = "3x")]
async fn pay(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
