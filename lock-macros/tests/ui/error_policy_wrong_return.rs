use distlock::distributed_lock;

#[distributed_lock("job")]
async fn returns_unit() {}

#[distributed_lock("job")]
async fn error_type_without_from() -> Result<(), String> {
    Ok(())
}

fn main() {}
