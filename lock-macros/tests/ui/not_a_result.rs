use lock_core::distributed_lock;

#[distributed_lock(key = "order:<id>")]
async fn pay(id: u64) -> u64 {
    id
}

fn main() {}
