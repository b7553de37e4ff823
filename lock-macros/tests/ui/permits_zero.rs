use lock_core::{LockError, distributed_lock};

#[distributed_lock(key = "export:<id>", permits = 0)]
async fn export(id: u64) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

fn main() {}
