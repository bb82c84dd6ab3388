use distlock::{LockError, distributed_lock};

#[distributed_lock("tenant:{self.tenant}")]
async fn settle(order_id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
