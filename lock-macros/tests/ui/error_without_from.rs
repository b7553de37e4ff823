use lock_core::distributed_lock;

#[derive(Debug)]
struct AppError;

#[distributed_lock(key = "order:<id>")]
async fn pay(id: u64) -> Result<(), AppError> {
    Ok(())
}

fn main() {}
