use distlock::{LockError, distributed_lock};

const WORKERS: u32 = 8;

#[distributed_lock("pdf-workers", max = "8")]
async fn a_string() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 8, permits = -1)]
async fn negative() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = WORKERS)]
async fn a_constant() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 2.5)]
async fn a_float() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("pdf-workers", max = 8u8)]
async fn another_integer_type() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
