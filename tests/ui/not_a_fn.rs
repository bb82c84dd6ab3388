use distlock::distributed_lock;

#[distributed_lock("job")]
struct Job;

fn main() {}
