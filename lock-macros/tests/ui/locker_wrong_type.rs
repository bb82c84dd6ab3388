use distlock::{LockError, distributed_lock};

struct State {
    redis_url: String,
}

#[distributed_lock("job", locker = state.redis_url)]
async fn job(state: &State) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
