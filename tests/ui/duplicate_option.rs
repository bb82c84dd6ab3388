use distlock::{LockError, distributed_lock};

#[distributed_lock("job", ttl = "1s", wait = "1s", ttl = "2s")]
async fn job() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
