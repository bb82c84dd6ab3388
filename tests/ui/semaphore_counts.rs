use distlock::{LockError, distributed_lock};

#[distributed_lock("pdf-workers", permits = 2)]
async fn permits_without_max() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", permits = 0, max = 8)]
async fn no_permits() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 0)]
async fn an_empty_semaphore() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", permits = 9, max = 8)]
async fn more_permits_than_max() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 2000000)]
async fn max_too_large() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
