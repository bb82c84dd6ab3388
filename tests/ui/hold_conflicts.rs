use distlock::{LockError, distributed_lock};

#[distributed_lock("job", ttl = "10s", max_hold = "1m")]
async fn max_hold_of_a_fixed_lease() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", min_hold = "5s")]
async fn min_hold_without_ttl() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", ttl = "5s", min_hold = "10s")]
async fn min_hold_past_the_ttl() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
