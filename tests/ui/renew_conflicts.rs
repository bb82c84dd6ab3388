use distlock::{LockError, distributed_lock};

#[distributed_lock("job", ttl = "10s", renew = true)]
async fn renewed_fixed_lease() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", renew = false)]
async fn fixed_lease_without_ttl() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("job", renew = "no")]
async fn not_a_bool() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
