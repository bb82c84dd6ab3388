use distlock::{LockError, distributed_lock};

#[distributed_lock("job", timeout = "1s")]
async fn job() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
