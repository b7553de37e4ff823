use lock_core::{LockError, distributed_lock};

#[distributed_lock(key = "pool:<id>", permits = 4, kind = "read")]
async fn export(id: u64) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

fn main() {}
