use distlock::distributed_lock;

#[distributed_lock("job", skip = true)]
async fn job() {}

fn main() {}
