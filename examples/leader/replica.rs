//! One replica process: campaigns with `Election::run`; while it leads, its work writes to the
//! fenced resource every 100 ms with its term. It reports each term's start and end and each
//! write on stdout, one line each, for the parent.

use std::time::Duration;

use clap::Args;
use distlock::{Locker, TermEvent, redis::RedisLock};

#[derive(Debug, Args)]
pub(crate) struct ReplicaArgs {
    #[arg(long)]
    redis_url: String,
    #[arg(long)]
    id: usize,
    /// The leader's lease, in milliseconds.
    #[arg(long)]
    lease_ms: u64,
}

/// The fenced resource: it keeps the largest term it accepted and rejects a write with a
/// smaller one. A real resource does the same check in its own store (a `WHERE term <= $1`,
/// a conditional put).
const FENCED_WRITE: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < last then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
";

/// The key of the fenced resource.
pub(crate) const RESOURCE: &str = "leader-example:resource";

pub(crate) fn main(args: &ReplicaArgs) -> Result<(), crate::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: &ReplicaArgs) -> Result<(), crate::Error> {
    let locker = Locker::new(RedisLock::from_url(&args.redis_url)?);
    let resource = redis::Client::open(args.redis_url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let id = args.id;
    let election = locker
        .elect("leader-example")
        .value(format!("replica {id}"))
        .lease(Duration::from_millis(args.lease_ms));
    // The work of one term: cancelled by the run when the leadership is lost.
    let mut run = election.run(move |lease| {
        let mut resource = resource.clone();
        async move {
            let term = lease.fencing_token();
            loop {
                let accepted: i64 = redis::Script::new(FENCED_WRITE)
                    .key(RESOURCE)
                    .arg(term)
                    .invoke_async(&mut resource)
                    .await
                    .unwrap_or(-1);
                let outcome = if accepted == 1 { "ok" } else { "rejected" };
                println!("wrote {id} {term} {outcome}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    });
    // Until the parent kills this process.
    while let Some(event) = run.next_event().await {
        match event {
            TermEvent::Started { term } => println!("started {id} {term}"),
            TermEvent::Ended { term, end } => println!("ended {id} {term} {end:?}"),
            other => println!("event {id} {other:?}"),
        }
    }
    Ok(())
}
