use distlock::{LockError, distributed_lock};

struct OrderId(u64);

#[distributed_lock("order:{id}")]
async fn settle(id: OrderId) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
