use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "job:nightly", ttl = "30s", watchdog = false, hold_at_least = "5m")]
async fn nightly() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
