//! # Redlock over five local Redis masters: nodes fail, the lock carries on
//!
//! Starts five throwaway `redis-server`s (through `lock-testkit`, so one must be installed:
//! `bash scripts/ensure-redis.sh`), then lets three clients — each its own `Redlock` over the
//! five, as three services would — contend for one lock while nodes fail:
//!
//! 1. all five up;
//! 2. `redis-5` killed: four of five, the quorum (three) is there;
//! 3. `redis-4` hung (SIGSTOP) as well: three of five, still a quorum, and no client waits for
//!    the hung node;
//! 4. `redis-3` killed too: two of five, **no quorum**: every acquire fails with
//!    `QuorumNotReached`, and nothing is left behind on the live nodes;
//! 5. recovery by the delayed-restart rule: the crashed nodes stay out longer than the TTL, then
//!    rejoin empty, and the lock works on all five again.
//!
//! In every phase it checks that no two clients held the lock at once and that fencing tokens
//! only went up, and it prints what it saw. Exits 0 when everything happened as described, 1 if
//! anything unexpected happened, 2 if it could not run (no `redis-server`). Bounded: about
//! 15 seconds, at most 2 minutes.
//!
//! ```text
//! cargo run --example redlock --features redlock
//! ```
//!
//! Files: `nodes.rs` (the five servers), `workload.rs` (the contending clients and their checks).

mod nodes;
mod workload;

use std::process::ExitCode;
use std::time::Duration;

use distlock::{Locker, redlock::Redlock};
use nodes::Nodes;
use workload::{LOCK, Phase, TTL};

/// How long each phase lets the clients contend.
const PHASE: Duration = Duration::from_secs(2);
/// The whole run's bound.
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// Contending clients.
const CLIENTS: usize = 3;

/// Things that went other than described; the run exits 1 if there are any.
#[derive(Default)]
struct Surprises(Vec<String>);

impl Surprises {
    fn check(&mut self, ok: bool, what: impl Into<String>) {
        if ok {
            println!("   ✓ {}", what.into());
        } else {
            let what = what.into();
            println!("   ✗ UNEXPECTED: {what}");
            self.0.push(what);
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let nodes = match Nodes::start(5) {
        Ok(nodes) => nodes,
        Err(error) => {
            eprintln!("cannot start redis-server (run `bash scripts/ensure-redis.sh`): {error}");
            return ExitCode::from(2);
        }
    };
    match tokio::time::timeout(RUN_LIMIT, run(nodes)).await {
        Ok(Ok(surprises)) if surprises.0.is_empty() => {
            println!("\nEverything happened as described.");
            ExitCode::SUCCESS
        }
        Ok(Ok(surprises)) => {
            println!("\n{} unexpected outcome(s):", surprises.0.len());
            for s in &surprises.0 {
                println!("  - {s}");
            }
            ExitCode::from(1)
        }
        Ok(Err(error)) => {
            eprintln!("the run failed: {error}");
            ExitCode::from(1)
        }
        Err(_) => {
            eprintln!("the run took longer than {RUN_LIMIT:?}");
            ExitCode::from(1)
        }
    }
}

type Error = Box<dyn std::error::Error + Send + Sync>;

async fn run(mut nodes: Nodes) -> Result<Surprises, Error> {
    let mut surprises = Surprises::default();
    let clients: Vec<Redlock> = (0..CLIENTS)
        .map(|_| nodes.client())
        .collect::<Result<_, _>>()?;
    let quorum = clients[0].quorum();
    println!(
        "Five Redis masters on 127.0.0.1 ports {}; {CLIENTS} clients, each a Redlock over all five \
         (quorum {quorum}), contend for the lock {LOCK:?} with a {TTL:?} TTL.",
        (0..nodes.len())
            .map(|i| nodes.port(i).to_string())
            .collect::<Vec<_>>()
            .join(", "),
    );
    println!(
        "Per-node timeout {:?}, clock-drift allowance {:?}: a lease is valid for the TTL less the \
         time the quorum took to answer, less the drift.",
        clients[0].node_timeout(TTL),
        clients[0].drift(TTL)
    );
    let lockers: Vec<Locker> = clients.iter().cloned().map(Locker::new).collect();
    let mut fence = 0;

    section(1, "All five nodes up.", &nodes);
    show_one_grant(&lockers[0], &nodes).await?;
    fence = healthy_phase(&lockers, &nodes, fence, &mut surprises).await;

    nodes.kill(4);
    section(2, "redis-5 killed (SIGKILL): four of five left.", &nodes);
    show_one_grant(&lockers[0], &nodes).await?;
    fence = healthy_phase(&lockers, &nodes, fence, &mut surprises).await;

    nodes.hang(3)?;
    section(
        3,
        "redis-4 hung as well (SIGSTOP): three of five answer, one never does.",
        &nodes,
    );
    show_one_grant(&lockers[0], &nodes).await?;
    fence = healthy_phase(&lockers, &nodes, fence, &mut surprises).await;

    nodes.kill(2);
    section(
        4,
        "redis-3 killed too: two of five left — no quorum.",
        &nodes,
    );
    let seen = workload::run(&lockers, PHASE, fence).await;
    report(&seen);
    surprises.check(seen.granted == 0, "no client got the lock without a quorum");
    surprises.check(
        seen.failed
            .keys()
            .all(|k| k.starts_with("quorum not reached")),
        "every attempt failed with QuorumNotReached",
    );
    let left = nodes.wait_gone(LOCK).await;
    surprises.check(
        left.is_empty(),
        format!(
            "nothing left behind on the live nodes{}",
            if left.is_empty() {
                String::new()
            } else {
                format!(" (still on {left:?})")
            }
        ),
    );

    let delay = TTL + Duration::from_millis(500);
    println!(
        "\n   redis-3 and redis-5 crashed and lost their keys, so each stays out longer than the \
         longest TTL ({TTL:?}) before rejoining (the delayed-restart rule): waiting {delay:?}."
    );
    tokio::time::sleep(delay).await;
    for i in [2, 3, 4] {
        nodes.bring_back(i)?;
    }
    section(
        5,
        "Recovery: redis-3 and redis-5 back (empty), redis-4 resumed (SIGCONT).",
        &nodes,
    );
    show_one_grant(&lockers[0], &nodes).await?;
    healthy_phase(&lockers, &nodes, fence, &mut surprises).await;
    let left = nodes.wait_gone(LOCK).await;
    surprises.check(left.is_empty(), "every lock released on every node");
    Ok(surprises)
}

fn section(n: usize, what: &str, nodes: &Nodes) {
    println!("\n{n}. {what}");
    println!("   nodes: {}", nodes.states());
}

/// Takes the lock once and shows which nodes hold it.
async fn show_one_grant(locker: &Locker, nodes: &Nodes) -> Result<(), Error> {
    let guard = locker.lock(LOCK).fixed_ttl(TTL).wait(TTL).await?;
    let token = distlock::redis::token_value(guard.lease().token())
        .as_str()
        .to_owned();
    // The quorum answered; give the other live nodes a moment to answer too.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let held: Vec<String> = nodes
        .read(LOCK)
        .await
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let mark = match v {
                Some(Some(t)) if *t == token => "holds it".to_owned(),
                Some(Some(_)) => "holds another token".to_owned(),
                Some(None) => "does not hold it (missed or not yet)".to_owned(),
                None => format!("({})", nodes.state(i)),
            };
            format!("{} {mark}", Nodes::name(i))
        })
        .collect();
    println!(
        "   one grant: fencing token {}, valid for {:?}; {}",
        guard.fencing_token(),
        guard.remaining(),
        held.join(", ")
    );
    guard.release().await?;
    Ok(())
}

/// A phase with a quorum up: every acquire must succeed, one holder at a time, fences rising.
async fn healthy_phase(
    lockers: &[Locker],
    nodes: &Nodes,
    fence: u64,
    surprises: &mut Surprises,
) -> u64 {
    let seen = workload::run(lockers, PHASE, fence).await;
    report(&seen);
    surprises.check(
        seen.granted > 0 && seen.failures() == 0,
        format!(
            "with {} of 5 nodes up every acquire was granted",
            nodes.up()
        ),
    );
    surprises.check(seen.overlaps == 0, "never two holders at once");
    surprises.check(seen.fence_backwards == 0, "fencing tokens only went up");
    seen.last_fence
}

fn report(seen: &Phase) {
    println!(
        "   {} locks granted, {} attempts failed; median acquire {}",
        seen.granted,
        seen.failures(),
        seen.p50().map_or_else(
            || "—".to_owned(),
            |d| format!("{:.2} ms", d.as_secs_f64() * 1e3)
        )
    );
    for (kind, n) in &seen.failed {
        println!("   {n} × {kind}");
    }
}
