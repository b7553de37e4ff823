use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "shard:<self.shard>")]
async fn pay(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
