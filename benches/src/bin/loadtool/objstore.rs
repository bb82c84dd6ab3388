//! O1, O2, the takeover and O5: distlock on object storage (`ObjectStoreLock`) on one
//! throwaway SeaweedFS (lock-testkit's `SeaweedfsServer`, S3 on loopback).
//!
//! - O1 and O2: S1 (one task) and S2 (S2's tasks, each its own name) in rounds that interleave
//!   distlock's `ObjectStoreLock` through its `Locker`, the `ObjectStoreLock` alone
//!   (`Lock::try_acquire` + `Lock::release`), the same two conditional updates sent bare
//!   (`distlock_bench::BareS3Updates`: what the store charges for keeping the object) and the
//!   hand-written lock (`distlock_bench::HandS3Lock`: `PUT If-None-Match: *` + `DELETE`) on the
//!   same server and the same client (`object_store`'s S3 client). The server is not probed:
//!   client CPU only.
//! - Takeover: a holder takes a lease and dies (no renewal, no release); a contender that never
//!   saw it asks at once. Recorded: the time to its grant less one lease (by design a takeover
//!   waits at least one lease: the contender must see the object unchanged for that long).
//! - O5: locks held with renewal for some lease periods through a store that counts the
//!   requests it forwards: requests per renewed lock per lease period (S3 bills per request).

use std::sync::Arc;
use std::time::Duration;

use distlock_bench::{BareS3Updates, HandS3Lock};
use lock_core::backend::{Attempt, Lock};
use lock_core::{Locker, Token};
use lock_object_store::ObjectStoreLock;
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY, SeaweedfsServer};
use serde::Serialize;
use tokio::runtime::Runtime;
use tokio::time::Instant;

use crate::cli::{Part, Plan};
use crate::cycles::{Client, CycleRun};
use crate::info::Probe;
use crate::interleave;
use crate::objstore_count::{Counted, Counts};
use crate::progress::Progress;
use crate::stats::{Latency, nanos, ratio};
use crate::step::block;

/// distlock on object storage through its `Locker`.
pub(crate) const DISTLOCK: &str = "distlock object-store";
/// The `ObjectStoreLock` alone, without the `Locker`.
pub(crate) const BACKEND: &str = "ObjectStoreLock alone";
/// The same two conditional updates as the `ObjectStoreLock`, without the lock around them.
pub(crate) const BARE: &str = "bare conditional updates (PUT If-Match ×2)";
/// The hand-written lock: create + delete.
pub(crate) const HAND: &str = "hand-written (PUT If-None-Match + DELETE)";
/// Who runs O1 and O2, in this order.
pub(crate) const CLIENTS: [&str; 4] = [DISTLOCK, BACKEND, BARE, HAND];

/// The lease of the takeover's dead holder.
pub(crate) const TAKEOVER_LEASE: Duration = Duration::from_secs(2);
/// Locks O5 holds with renewal.
pub(crate) const O5_LOCKS: usize = 20;

/// What the takeover measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TakeoverRun {
    pub(crate) lease_ms: u64,
    /// From the holder's death to the contender's grant, less one lease.
    pub(crate) excess: Latency,
    /// Every sample, ms.
    pub(crate) excess_ms: Vec<f64>,
}

/// What O5 counted while its locks were held.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RenewalCount {
    pub(crate) locks: usize,
    pub(crate) lease_ms: u64,
    pub(crate) periods: u32,
    /// Requests sent while held, by kind: PUT, GET (or HEAD), DELETE, other.
    pub(crate) puts: u64,
    pub(crate) gets: u64,
    pub(crate) deletes: u64,
    pub(crate) other: u64,
    /// All of them, per lock and lease period.
    pub(crate) per_lock_per_period: f64,
    /// Locks no longer held at the end (renewal failed).
    pub(crate) lost: usize,
}

/// Everything measured on object storage.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ObjStoreRun {
    /// SeaweedFS's version, as lock-testkit installs it.
    pub(crate) version: &'static str,
    pub(crate) o1: Vec<CycleRun>,
    pub(crate) o2: Vec<CycleRun>,
    pub(crate) takeover: Option<TakeoverRun>,
    pub(crate) o5: Option<RenewalCount>,
}

/// Starts SeaweedFS, runs the object-storage parts of `plan`, stops it.
pub(crate) fn run(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> Result<ObjStoreRun, String> {
    progress.next();
    let server = SeaweedfsServer::start().map_err(|e| format!("starting SeaweedFS: {e}"))?;
    let mut out = ObjStoreRun {
        version: lock_testkit::SEAWEEDFS_VERSION,
        o1: Vec::new(),
        o2: Vec::new(),
        takeover: None,
        o5: None,
    };
    let clients = clients(&server)?;
    let mut probe = Probe::client_only();
    if plan.has(Part::O1) {
        out.o1 = interleave::rounds(
            &interleave::Part {
                scenario: "O1",
                tasks: 1,
                labels: &CLIENTS,
                separator: "-",
            },
            plan,
            runtime,
            progress,
            &clients,
            &mut probe,
        )?;
    }
    if plan.has(Part::O2) {
        let tasks = plan.s2_tasks;
        out.o2 = interleave::rounds(
            &interleave::Part {
                scenario: "O2",
                tasks,
                labels: &CLIENTS,
                separator: "-",
            },
            plan,
            runtime,
            progress,
            &clients,
            &mut probe,
        )?;
    }
    if plan.has(Part::OTakeover) {
        progress.next();
        let planned = TAKEOVER_LEASE * u32::try_from(plan.takeovers()).unwrap_or(1);
        out.takeover = Some(block(
            runtime,
            planned,
            takeover(&server, plan.takeovers()),
        )??);
    }
    if plan.has(Part::O5) {
        progress.next();
        let held = plan.s5_lease * plan.s5_periods;
        out.o5 = Some(block(runtime, held, renewal(&server, plan))??);
    }
    drop(server);
    Ok(out)
}

/// An `ObjectStoreLock` on `server` under `prefix`, with its default request timeout.
fn lock(server: &SeaweedfsServer, prefix: &str) -> Result<ObjectStoreLock, String> {
    ObjectStoreLock::builder()
        .url(server.url(prefix))
        .endpoint(server.endpoint())
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .build()
        .map_err(|e| e.to_string())
}

/// O1's and O2's four clients, each under a prefix of its own.
fn clients(server: &SeaweedfsServer) -> Result<Vec<Client>, String> {
    let hand_store = Arc::clone(lock(server, "hand")?.store());
    Ok(vec![
        Client::Locker(Locker::new(lock(server, "distlock")?), None),
        Client::Backend(Arc::new(lock(server, "backend")?)),
        Client::BareS3(BareS3Updates::new(Arc::clone(&hand_store), "bare")),
        Client::HandS3(HandS3Lock::new(hand_store, "hand")),
    ])
}

/// `rounds` takeovers: a holder takes [`TAKEOVER_LEASE`] and dies; a fresh contender (it never
/// saw the holder, as a new process would) asks at once and waits.
async fn takeover(server: &SeaweedfsServer, rounds: usize) -> Result<TakeoverRun, String> {
    let lease = TAKEOVER_LEASE;
    let mut samples = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let name = format!("takeover-{round}-{:x}", fastrand::u64(..));
        let dead = lock(server, "takeover")?;
        let token = Token::generate().map_err(|e| e.to_string())?;
        match dead.try_acquire(&name, token, lease).await {
            Ok(Attempt::Acquired(_)) => {}
            Ok(Attempt::Busy { .. }) => return Err(format!("takeover: {name} was busy")),
            Err(e) => return Err(format!("takeover: the holder's grant: {e}")),
        }
        let died = Instant::now();
        let contender = Locker::new(lock(server, "takeover")?);
        let guard = contender
            .lock(name.as_str())
            .fixed_ttl(lease)
            .wait(lease * 5)
            .await
            .map_err(|e| format!("takeover: the contender: {e}"))?;
        samples.push(nanos(died.elapsed().saturating_sub(lease)));
        guard.release().await.map_err(|e| e.to_string())?;
    }
    let excess_ms = samples.iter().map(|n| *n as f64 / 1e6).collect();
    Ok(TakeoverRun {
        lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
        excess: Latency::from_nanos(&mut samples),
        excess_ms,
    })
}

/// O5: [`O5_LOCKS`] locks held with renewal for S5's lease periods, through a counting store.
async fn renewal(server: &SeaweedfsServer, plan: &Plan) -> Result<RenewalCount, String> {
    let counts = Arc::new(Counts::default());
    let store = Arc::clone(lock(server, "o5")?.store());
    let counted = Arc::new(Counted::new(store, Arc::clone(&counts)));
    let lease = plan.s5_lease;
    let locker = Locker::builder(ObjectStoreLock::new(
        counted,
        "o5",
        lock_object_store::DEFAULT_OPERATION_TIMEOUT,
    ))
    .lease(lease)
    .build();
    let mut guards = Vec::with_capacity(O5_LOCKS);
    for i in 0..O5_LOCKS {
        let guard = locker
            .lock(format!("o5-{i}"))
            .try_acquire()
            .await
            .map_err(|e| format!("O5: {e}"))?
            .ok_or("O5: a lock was busy")?;
        guards.push(guard);
    }
    let before = counts.now();
    tokio::time::sleep(lease * plan.s5_periods).await;
    let after = counts.now();
    let lost = guards.iter().filter(|g| !g.is_held()).count();
    for guard in guards {
        let _ = guard.release().await;
    }
    let [puts, gets, deletes, other] = [0, 1, 2, 3].map(|k| after[k] - before[k]);
    let periods = f64::from(plan.s5_periods) * O5_LOCKS as f64;
    Ok(RenewalCount {
        locks: O5_LOCKS,
        lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
        periods: plan.s5_periods,
        puts,
        gets,
        deletes,
        other,
        per_lock_per_period: ratio((puts + gets + deletes + other) as f64, periods),
        lost,
    })
}

/// O1's and O2's errors, a lost O5 lock: a run with any is not a valid measurement.
pub(crate) fn failures(run: &ObjStoreRun, failures: &mut Vec<String>) {
    for r in run.o1.iter().chain(&run.o2).filter(|r| r.errors > 0) {
        failures.push(format!(
            "{} {}: {} errors (first: {})",
            r.scenario,
            r.client,
            r.errors,
            r.first_error.as_deref().unwrap_or("-")
        ));
    }
    if let Some(o5) = run.o5.as_ref().filter(|o5| o5.lost > 0) {
        failures.push(format!(
            "O5: {} of {} renewed locks lost",
            o5.lost, o5.locks
        ));
    }
}

/// The object-storage tables.
pub(crate) fn report(run: Option<&ObjStoreRun>) {
    let Some(run) = run else {
        return;
    };
    for (runs, title) in [
        (&run.o1, "O1 uncontended (1 task)"),
        (&run.o2, "O2 parallel (each task its own name)"),
    ] {
        if runs.is_empty() {
            continue;
        }
        println!(
            "\n{title} on SeaweedFS {} (S3): acquire + release cycles",
            run.version
        );
        let rows: Vec<&CycleRun> = runs.iter().collect();
        println!(
            "{}",
            crate::tables::cycle_table(&rows, "server µs/cycle (not probed)", |c| c
                .server_cpu_us_per_op)
        );
        let find = |client: &str| runs.iter().find(|r| r.client == client);
        if let (Some(d), Some(h)) = (find(DISTLOCK), find(HAND)) {
            println!(
                "  distlock: {:.2}× the hand-written lock ({:.0} of {:.0} cycles/s)",
                ratio(d.per_second, h.per_second),
                d.per_second,
                h.per_second
            );
        }
        if let (Some(d), Some(b)) = (find(DISTLOCK), find(BARE)) {
            println!(
                "  distlock: {:.2}× its own requests sent bare ({:.0} of {:.0} cycles/s): the \
                 rest of the gap is the store's update against a delete",
                ratio(d.per_second, b.per_second),
                d.per_second,
                b.per_second
            );
        }
    }
    if let Some(t) = &run.takeover {
        println!(
            "\nObject-storage takeover after a holder died (lease {} ms, {} rounds): excess over \
             the lease p50 {:.1} ms, max {:.1} ms",
            t.lease_ms,
            t.excess.samples,
            t.excess.p50_us / 1e3,
            t.excess.max_us / 1e3
        );
    }
    if let Some(o5) = &run.o5 {
        println!(
            "\nO5 {} locks renewed for {} lease periods of {} ms: {} PUT, {} GET, {} DELETE, {} \
             other = {:.2} requests per lock per lease period; {} lost",
            o5.locks,
            o5.periods,
            o5.lease_ms,
            o5.puts,
            o5.gets,
            o5.deletes,
            o5.other,
            o5.per_lock_per_period,
            o5.lost
        );
    }
}
