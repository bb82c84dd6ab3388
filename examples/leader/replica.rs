//! One replica process: campaigns with `Election::run` on the backend it is given; while it
//! leads, its work writes to the fenced resource (on Redis) every 100 ms with its term. It
//! reports each term's start (stamped on the machine's monotonic clock) and end and each write
//! on stdout, one line each, for the parent.

use std::time::Duration;

use clap::Args;
use distlock::{Fence, LockError, TermEvent, redis::RedisLock};

use crate::backend::{self, Backend};
use crate::clock;

#[derive(Debug, Args)]
pub(crate) struct ReplicaArgs {
    /// The Redis of the fenced resource (and of the lock with `--backend redis`).
    #[arg(long)]
    redis_url: String,
    /// Where the election runs.
    #[arg(long, value_enum)]
    backend: Backend,
    /// The lock's server with `--backend postgres` (its URL) or `etcd` (endpoints, comma
    /// separated).
    #[arg(long)]
    lock_url: Option<String>,
    #[arg(long)]
    id: usize,
    /// The leader's lease, in milliseconds.
    #[arg(long)]
    lease_ms: u64,
}

/// The key of the fenced resource, written with lock-redis's fence (`distlock_fenced_set`): it
/// keeps the largest term it accepted and refuses a write with a smaller one, accepts an equal
/// one (the leader writes many times per term).
pub(crate) const RESOURCE: &str = "leader-example:resource";

pub(crate) fn main(args: &ReplicaArgs) -> Result<(), crate::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: &ReplicaArgs) -> Result<(), crate::Error> {
    // The resource is on Redis whatever the backend of the election.
    let resource = RedisLock::from_url(&args.redis_url)?;
    let fences = resource.fences();
    let locker = backend::locker(args.backend, args.lock_url.as_deref(), resource)?;
    let id = args.id;
    let election = locker
        .elect("leader-example")
        .value(format!("replica {id}"))
        .lease(Duration::from_millis(args.lease_ms));
    // The work of one term: cancelled by the run when the leadership is lost.
    let mut run = election
        .run(move |lease| {
            let fences = fences.clone();
            async move {
                let term = lease.fencing_token();
                let fence = Fence::new(RESOURCE, term);
                let value = format!("replica {id}");
                loop {
                    let outcome = match fences.set(&fence, value.as_bytes(), None).await {
                        Ok(()) => "ok",
                        Err(LockError::Fenced { .. }) => "rejected",
                        Err(_) => "error",
                    };
                    println!("wrote {id} {term} {outcome}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        })
        // SIGTERM (or Ctrl-C) ends the run: the term's work is cancelled and the leadership given
        // up at once, so another replica leads within a round trip or two, not a lease later.
        .stop_on(distlock::shutdown());
    // Until the parent kills this process, or SIGTERM ends the run (the events then end).
    while let Some(event) = run.next_event().await {
        match event {
            TermEvent::Started { term } => println!("started {id} {term} {}", clock::now_ns()),
            TermEvent::Ended { term, end } => println!("ended {id} {term} {end:?}"),
            other => println!("event {id} {other:?}"),
        }
    }
    Ok(())
}
