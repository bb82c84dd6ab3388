use distlock::{LockError, distributed_lock};

#[distributed_lock("job", ttl = "0s")]
async fn zero() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", ttl = "1500us")]
async fn sub_millisecond() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
