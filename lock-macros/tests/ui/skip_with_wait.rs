use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly", if_held = "skip", wait = "5s")]
async fn nightly() -> Result<Option<u32>, LockError> {
    Ok(Some(1))
}

fn main() {}
