use lock_core::{distributed_lock, LockError};

#[distributed_lock(ttl = "30s")]
async fn pay(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {
    // Still emitted: this call resolves.
    let _ = pay(1);
}
