use distlock::{LockError, distributed_lock};

#[distributed_lock("job", skip)]
async fn job() -> Result<u32, LockError> {
    Ok(1)
}

fn main() {}
