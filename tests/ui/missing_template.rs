use distlock::{LockError, distributed_lock};

#[distributed_lock]
async fn nothing() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(ttl = "1s")]
async fn options_only() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
