use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly", if_held = "skip")]
async fn nightly() -> Result<u32, LockError> {
    Ok(1)
}

fn main() {}
