//! The cost curves (issue 51, item 4): how the cost of holding and of waiting grows with
//! scale, where S5 and S6 measure one point each.
//!
//! - **C1, held locks**: S5's child ([`crate::renewal`]) holds 1,000 → 100,000 renewed locks
//!   for a few lease periods on each backend (Redis, Valkey, PostgreSQL's lease table, etcd,
//!   MariaDB's lease table); every point gets a fresh server (so its memory is that of these
//!   locks only), whose PID the child reads for the server's CPU and memory
//!   ([`crate::server_cost`]).
//! - **C2, waiters on one name**: S6's shape at 10 → 10,000 waiters ([`crate::curve_waiters`])
//!   on Redis, PostgreSQL and etcd: commands, time to the next grant and wake-ups per release.
//!
//! Not in the default run (they take minutes): `--only c1,c2`. Writes its figures into
//! `run.json` (`curves`) and one SVG per curve ([`crate::curve_chart`]); the tables and the
//! linearity verdicts come from [`crate::curve_report`].

use std::time::Duration;

use tokio::runtime::Runtime;

use crate::cli::{Part, Plan};
use crate::curve_plan::{CurveBackend, CurvePlan, CurvesRun, HeldCurve, WaitersCurve};
use crate::curve_server::Server;
use crate::progress::Progress;
use crate::renewal::{self, HeldLeases};
use crate::step::block;

/// The progress steps of the curves, with their planned times.
pub(crate) fn steps(plan: &Plan) -> Vec<(String, Duration)> {
    let c = &plan.curves;
    let mut s = Vec::new();
    if plan.has(Part::C1) {
        for backend in &c.backends {
            for n in &c.locks {
                let hold = lease_for(*backend, c.lease) * c.periods;
                let take = Duration::from_secs_f64(*n as f64 / 4_000.0);
                s.push((
                    format!("C1 {} renewed locks on {}", n, backend.label()),
                    hold + take * 2 + Duration::from_secs(3),
                ));
            }
        }
    }
    if plan.has(Part::C2) {
        for backend in &c.waiter_backends {
            for n in &c.waiters {
                s.push((
                    format!("C2 {} waiters on one name, {}", n, backend.label()),
                    Duration::from_secs_f64(2.0 + *n as f64 / 1_000.0),
                ));
            }
        }
    }
    s
}

/// Prints the curves' tables and verdicts and writes their SVGs into the run's directory.
pub(crate) fn report(curves: &CurvesRun, run: &crate::run::Run, plan: &Plan) -> Result<(), String> {
    crate::curve_report::print(curves);
    let subtitle = format!(
        "loopback · {} × {} · {} tokio runtime · C1: lease {:.0} s × {} periods (etcd ≥ 10 s) · one run",
        run.machine.cpus,
        run.machine.cpu_model,
        run.plan.runtime.as_arg(),
        plan.curves.lease.as_secs_f64(),
        plan.curves.periods
    );
    for file in crate::curve_chart::write(curves, &plan.out, &subtitle)? {
        println!("Wrote {file}");
    }
    Ok(())
}

/// etcd counts leases in whole seconds and a single member lost most of 10,000 leases at
/// 2 s (E5): it renews at 10 s or longer.
fn lease_for(backend: CurveBackend, lease: Duration) -> Duration {
    match backend {
        CurveBackend::Etcd => Duration::from_secs(lease.as_secs().max(10)),
        _ => lease,
    }
}

/// Runs C1 and C2 as the plan asks.
pub(crate) fn run(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> Result<CurvesRun, String> {
    let c = &plan.curves;
    let mut out = CurvesRun::default();
    if plan.has(Part::C1) {
        for &backend in &c.backends {
            out.held
                .push(held_curve(backend, plan, c, runtime, progress));
        }
    }
    if plan.has(Part::C2) {
        for &backend in &c.waiter_backends {
            out.waiters
                .push(waiters_curve(backend, c, runtime, progress));
        }
    }
    Ok(out)
}

fn held_curve(
    backend: CurveBackend,
    plan: &Plan,
    c: &CurvePlan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> HeldCurve {
    let mut curve = HeldCurve {
        backend,
        server: String::new(),
        points: Vec::new(),
        stopped: None,
    };
    let lease = lease_for(backend, c.lease);
    for (i, &locks) in c.locks.iter().enumerate() {
        progress.next();
        let point = Server::start(backend).and_then(|server| {
            if curve.server.is_empty() {
                curve.server = server.describe(runtime);
            }
            let params = renewal::Params {
                kind: HeldLeases::Locks,
                backend: backend.renewal_backend(),
                locks,
                lease_ms: u64::try_from(lease.as_millis()).unwrap_or(u64::MAX),
                periods: c.periods,
                server_pid: server.pid(),
            };
            renewal::run(&server.url(), plan.runtime.as_arg(), params)
        });
        match point {
            Ok(point) => curve.points.push(point),
            Err(error) => {
                progress.note(&format!("C1 {}: {error}", backend.label()));
                // The points left are larger: they would fail the same way.
                for _ in i + 1..c.locks.len() {
                    progress.next();
                }
                curve.stopped = Some(format!("at {locks} locks: {error}"));
                break;
            }
        }
    }
    curve
}

fn waiters_curve(
    backend: CurveBackend,
    c: &CurvePlan,
    runtime: &Runtime,
    progress: &mut Progress,
) -> WaitersCurve {
    let mut curve = WaitersCurve {
        backend,
        points: Vec::new(),
        stopped: None,
    };
    // One server for the curve: a point leaves nothing held behind it.
    let server = match Server::start(backend) {
        Ok(server) => server,
        Err(error) => {
            progress.note(&format!("C2 {}: {error}", backend.label()));
            c.waiters.iter().for_each(|_| progress.next());
            curve.stopped = Some(error);
            return curve;
        }
    };
    for (i, &waiters) in c.waiters.iter().enumerate() {
        progress.next();
        let name = format!("c2:{waiters}");
        let planned = Duration::from_secs_f64(30.0 + waiters as f64 / 100.0);
        let point = block(runtime, planned, async {
            let (local, mut probe) = server.lock_and_probe().await?;
            let remote = server.other_lock()?;
            crate::curve_waiters::point(local, remote, &name, waiters, &mut probe).await
        })
        .and_then(|r| r);
        match point {
            Ok(point) => curve.points.push(point),
            Err(error) => {
                progress.note(&format!("C2 {}: {error}", backend.label()));
                for _ in i + 1..c.waiters.len() {
                    progress.next();
                }
                curve.stopped = Some(format!("at {waiters} waiters: {error}"));
                break;
            }
        }
    }
    curve
}
