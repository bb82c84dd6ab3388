use distlock::distributed_lock;

#[distributed_lock("job")]
async fn returns_unit() {}

/// An error type that cannot be made from a `LockError`.
struct JobError;

#[distributed_lock("job")]
async fn error_type_without_from() -> Result<(), JobError> {
    Ok(())
}

fn main() {}
