//! # distlock demo: worker processes, one lock, a fenced resource
//!
//! Several worker **processes** contend for the lock `demo:ledger` on a real Redis server (or,
//! with `--backend postgres`, on a real PostgreSQL through `PostgresLock`; with `--backend etcd`,
//! on a real etcd through `EtcdLock`) and, while holding it,
//! update two things, both kept in Redis:
//!
//! - a counter (`demo:counter`), with a deliberately non-atomic read-modify-write (GET, sleep,
//!   SET): if the lock ever let two holders in at once, increments would be lost;
//! - a fenced resource (`demo:resource`, see `resource.rs`) written through lock-redis's fence
//!   (`RedisFences::run` of a `FencedScript`): a write applies only if its fencing token is at
//!   least every one accepted before (equal: one holder writes many times).
//!
//! Every `--pause-every`th acquisition a worker simulates a stall (a GC pause, a swapped-out
//! process): it keeps its guard past the lease's TTL, another worker takes the lock, and when
//! the stalled worker wakes up its write carries a stale fencing token, which the resource
//! rejects. That is the failure fencing tokens exist for (Kleppmann, "How to do distributed
//! locking", 2016).
//!
//! The demo starts a throwaway `redis-server` (through `lock-testkit`, so one must be installed)
//! unless `--redis-url` names one, and with `--backend postgres` a throwaway PostgreSQL too
//! (`initdb` in a temporary directory) unless `--postgres-url` names one, and with `--backend
//! etcd` a throwaway one-member etcd unless `--etcd-url` names a cluster; runs the workers as
//! child processes of this executable, shows their progress live, and ends with a table. It exits with status 1 if the lock or the fencing
//! failed (an exclusion violation, a lost update, a stale write accepted) or a worker failed, 2
//! if it could not run at all, and 130 when interrupted.
//!
//! ```text
//! bash scripts/demo.sh                        # builds the demo for its backend, runs it
//! bash scripts/demo.sh --workers 8 --duration 20 --pause-every 10
//! bash scripts/demo.sh --fair                 # locker.fair: granted in the order asked
//! bash scripts/demo.sh --compare              # the plain lock, then the fair one, side by side
//! bash scripts/demo.sh --redis-url redis://127.0.0.1:6379/
//! bash scripts/demo.sh --backend postgres     # the lock on PostgreSQL (PostgresLock)
//! bash scripts/demo.sh --backend etcd         # the lock on etcd (EtcdLock)
//! cargo run --release -p distlock-demo --features etcd -- --backend etcd   # what it runs
//! bash scripts/demo.sh --help
//! ```
//!
//! Files: `cli.rs` (options), `parent.rs` (the run), `supervisor.rs` (worker processes),
//! `slot.rs` (one worker as the parent sees it), `progress.rs` (live display), `report.rs`
//! (final table), `worker.rs` (one worker), `protocol.rs` (worker → parent lines),
//! `resource.rs` (the Redis side, behind the library's fence), `stats.rs` (percentiles).

mod backends;
mod cli;
mod parent;
mod progress;
mod protocol;
mod report;
mod resource;
mod slot;
mod stats;
mod supervisor;
mod worker;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser as _, error::ErrorKind};

/// The error type of the demo's own plumbing.
pub(crate) type Error = Box<dyn std::error::Error + Send + Sync + 'static>;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match cli.command {
        Some(cli::Command::Worker(args)) => worker::main(&args),
        None => {
            if let Err(message) = cli.run.check() {
                cli::Cli::command()
                    .error(ErrorKind::ArgumentConflict, message)
                    .exit();
            }
            // Before any server starts: a backend this build lacks is the user's next command.
            if let Err(e) = backends::built_with(cli.run.backend) {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            parent::main(&cli.run)
        }
    }
}
