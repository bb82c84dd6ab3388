use distlock::{LockError, distributed_lock};

struct State {
    redis_port: u16,
}

#[distributed_lock("job", locker = state.redis_port)]
async fn job(state: &State) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
