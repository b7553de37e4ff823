use lock_core::{LockError, distributed_lock};

#[distributed_lock(key = "doc:<id>", kind = "shared")]
async fn render(id: u64) -> Result<(), LockError> {
    let _ = id;
    Ok(())
}

fn main() {}
