use distlock::{LockError, distributed_lock};

#[distributed_lock("doc", read, write)]
async fn read_and_write() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("doc", write, read)]
async fn write_and_read() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("doc", read, max = 8)]
async fn read_and_max() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", permits = 2, max = 8, write)]
async fn semaphore_and_write() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", fair, read)]
async fn fair_and_read() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", max = 2, fair)]
async fn max_and_fair() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
