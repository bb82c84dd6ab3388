use distlock::{LockError, distributed_lock};

#[distributed_lock("doc", read, read)]
async fn read_twice() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 8, permits = 1, max = 4)]
async fn max_twice() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("doc", write = true)]
async fn write_with_value() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
