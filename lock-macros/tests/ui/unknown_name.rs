use lock_core::{distributed_lock, LockError};

#[distributed_lock(key = "order:<order_id>")]
async fn pay(id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {
    let _ = pay(1);
}
