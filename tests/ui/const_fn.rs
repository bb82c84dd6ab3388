use distlock::distributed_lock;

#[distributed_lock("job")]
const fn job() -> u32 {
    1
}

fn main() {}
