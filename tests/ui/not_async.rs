use distlock::{LockError, distributed_lock};

#[distributed_lock("job")]
fn job() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
