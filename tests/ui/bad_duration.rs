use distlock::{LockError, distributed_lock};

#[distributed_lock("job", ttl = "30 parsecs")]
async fn job() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", wait = 250)]
async fn not_a_string() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
