use lock_core::{distributed_lock, LockError};

#[distributed_lock(keys = ["job:a", "job:b"], if_held = "skip")]
async fn nightly() -> Result<Option<u32>, LockError> {
    Ok(Some(1))
}

fn main() {}
