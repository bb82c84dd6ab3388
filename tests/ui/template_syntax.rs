use distlock::{LockError, distributed_lock};

#[distributed_lock("order:{id")]
async fn unclosed(id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:id}")]
async fn unmatched(id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:{}")]
async fn empty(id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:{id:?}")]
async fn format_spec(id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:{id.-x}")]
async fn bad_field(id: u64) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("")]
async fn empty_template() -> Result<(), LockError> {
    Ok(())
}

fn main() {}
