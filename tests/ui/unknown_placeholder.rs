use distlock::{LockError, distributed_lock};

#[distributed_lock("order:{order_idd}")]
async fn settle(order_id: u64, amount: u32) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
