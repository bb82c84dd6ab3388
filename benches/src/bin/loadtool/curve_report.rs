//! The cost curves' figures (per point, per lock, per renewal), their linearity verdicts,
//! tables, targets and failures ([`crate::curves`]).
//!
//! A verdict is computed from the points: between each two neighbours the log-log slope of
//! the cost against the scale (1 is linear: the cost per lock stays; 0 is flat, O(1); 2 is
//! quadratic), each segment classed, neighbours of one class merged.

use serde::Serialize;

use crate::curve_plan::{CurveBackend, CurvesRun, HeldCurve};
use crate::curve_waiters::WaitersPoint;
use crate::renewal::{RenewalRun, TARGET_LEASE};
use crate::target::{Target, target};

/// The figures of one C1 point, as the tables and charts show them.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct HeldFigures {
    pub(crate) locks: usize,
    /// Client CPU, % of one core, at the measured lease and scaled to 30 s leases.
    pub(crate) client_cpu_pct: f64,
    pub(crate) client_cpu_pct_30s: f64,
    /// Client CPU per renewal (one lease extended once), µs.
    pub(crate) client_us_per_renewal: f64,
    pub(crate) client_rss_mib: f64,
    /// Client RSS grown while taking the locks, per lock, KiB.
    pub(crate) client_kib_per_lock: f64,
    /// Server CPU (its processes, `/proc`), % of one core, measured and at 30 s leases.
    pub(crate) server_cpu_pct: f64,
    pub(crate) server_cpu_pct_30s: f64,
    pub(crate) server_us_per_renewal: f64,
    /// Server memory held: Redis's `used_memory` where there is one, else the server's Pss.
    pub(crate) server_mib: f64,
    /// The same grown while the locks were taken, per lock, bytes.
    pub(crate) server_bytes_per_lock: f64,
    pub(crate) lost: usize,
}

impl HeldFigures {
    pub(crate) fn of(r: &RenewalRun) -> Self {
        let scale = r.lease_s / TARGET_LEASE.as_secs_f64();
        let renewals = r.renewals.max(1) as f64;
        let n = r.locks.max(1) as f64;
        let server = r.server.unwrap_or_default();
        let mem = |m: crate::server_cost::ServerMemory| m.used_memory_mib.unwrap_or(m.pss_mib);
        Self {
            locks: r.locks,
            client_cpu_pct: r.cpu_share * 100.0,
            client_cpu_pct_30s: r.cpu_share * scale * 100.0,
            client_us_per_renewal: r.cpu_share * r.hold_s / renewals * 1e6,
            client_rss_mib: r.memory_held.rss,
            client_kib_per_lock: (r.memory_held.rss - r.memory_before.rss) * 1024.0 / n,
            server_cpu_pct: server.cpu_share * 100.0,
            server_cpu_pct_30s: server.cpu_share * scale * 100.0,
            server_us_per_renewal: server.cpu_share * r.hold_s / renewals * 1e6,
            server_mib: mem(server.held),
            server_bytes_per_lock: (mem(server.held) - mem(server.before)) * 1024.0 * 1024.0 / n,
            lost: r.lost,
        }
    }
}

/// The verdict on `(scale, cost)` points: each segment's log-log slope, classed and merged:
/// `linear 1k→100k (0.94–1.03)`, `flat (O(1)) 10→10k (−0.02–0.05)`.
pub(crate) fn verdict(points: &[(f64, f64)]) -> String {
    let segments: Vec<(f64, f64, f64)> = points
        .windows(2)
        .filter(|w| w[0].0 > 0.0 && w[1].0 > w[0].0 && w[0].1 > 0.0 && w[1].1 > 0.0)
        .map(|w| {
            (
                w[0].0,
                w[1].0,
                (w[1].1 / w[0].1).ln() / (w[1].0 / w[0].0).ln(),
            )
        })
        .collect();
    if segments.is_empty() {
        return "too few points".to_owned();
    }
    let class = |slope: f64| match slope {
        s if s < 0.2 => "flat (O(1))",
        s if s < 0.8 => "sublinear",
        s if s <= 1.2 => "linear",
        _ => "faster than linear",
    };
    let mut parts: Vec<(&str, f64, f64, f64, f64)> = Vec::new();
    for (from, to, slope) in segments {
        match parts.last_mut() {
            Some(last) if last.0 == class(slope) => {
                last.2 = to;
                last.3 = last.3.min(slope);
                last.4 = last.4.max(slope);
            }
            _ => parts.push((class(slope), from, to, slope, slope)),
        }
    }
    parts
        .iter()
        .map(|(class, from, to, lo, hi)| {
            let slopes = if (hi - lo).abs() < 0.005 {
                format!("{lo:.2}")
            } else {
                format!("{lo:.2}–{hi:.2}")
            };
            format!("{class} {}→{} (slope {slopes})", short(*from), short(*to))
        })
        .collect::<Vec<_>>()
        .join(", then ")
}

/// `1000` → `1k`, `100000` → `100k`.
pub(crate) fn short(n: f64) -> String {
    if n >= 1000.0 {
        format!("{}k", n / 1000.0)
    } else {
        format!("{n}")
    }
}

/// The verdicts of one held-locks curve, per figure, for the README and the record.
pub(crate) fn held_verdicts(curve: &HeldCurve) -> Vec<(&'static str, String)> {
    let f: Vec<HeldFigures> = curve.points.iter().map(HeldFigures::of).collect();
    let of = |cost: fn(&HeldFigures) -> f64| {
        verdict(
            &f.iter()
                .map(|p| (p.locks as f64, cost(p)))
                .collect::<Vec<_>>(),
        )
    };
    vec![
        ("client CPU", of(|p| p.client_cpu_pct)),
        (
            "client RSS (grown)",
            of(|p| p.client_kib_per_lock * p.locks as f64),
        ),
        ("server CPU", of(|p| p.server_cpu_pct)),
        (
            "server memory (grown)",
            of(|p| p.server_bytes_per_lock * p.locks as f64),
        ),
    ]
}

/// The verdicts of one waiters curve.
pub(crate) fn waiter_verdicts(points: &[WaitersPoint]) -> Vec<(&'static str, String)> {
    let of = |cost: fn(&WaitersPoint) -> f64| {
        verdict(
            &points
                .iter()
                .map(|p| (p.waiters as f64, cost(p)))
                .collect::<Vec<_>>(),
        )
    };
    vec![
        ("commands per release", of(|p| p.commands_per_release)),
        ("next grant p99", of(|p| p.gap.p99_us)),
        ("attempts per release", of(|p| p.attempts_per_release)),
        ("time per release", of(|p| p.us_per_release)),
        ("client CPU per release", of(|p| p.resolved_client_cpu_us())),
    ]
}

/// Prints the curves' tables and verdicts.
pub(crate) fn print(run: &CurvesRun) {
    for curve in &run.held {
        println!(
            "\nC1 renewed locks on {} ({})",
            curve.backend.label(),
            curve.server
        );
        let mut t = crate::tables::table(&[
            "locks",
            "lease s",
            "client CPU %",
            "at 30 s %",
            "µs/renewal",
            "client RSS MiB",
            "KiB/lock",
            "server CPU %",
            "at 30 s %",
            "server µs/renewal",
            "server MiB",
            "B/lock",
            "lost",
        ]);
        for (r, p) in curve.points.iter().map(|r| (r, HeldFigures::of(r))) {
            t.add_row(vec![
                p.locks.to_string(),
                format!("{:.0}", r.lease_s),
                format!("{:.2}", p.client_cpu_pct),
                format!("{:.2}", p.client_cpu_pct_30s),
                format!("{:.1}", p.client_us_per_renewal),
                format!("{:.1}", p.client_rss_mib),
                format!("{:.2}", p.client_kib_per_lock),
                format!("{:.2}", p.server_cpu_pct),
                format!("{:.2}", p.server_cpu_pct_30s),
                format!("{:.1}", p.server_us_per_renewal),
                format!("{:.1}", p.server_mib),
                format!("{:.0}", p.server_bytes_per_lock),
                p.lost.to_string(),
            ]);
        }
        println!("{t}");
        for (figure, v) in held_verdicts(curve) {
            println!("  {figure}: {v}");
        }
        if let Some(why) = &curve.stopped {
            println!("  stopped {why}");
        }
    }
    for curve in &run.waiters {
        println!("\nC2 waiters on one name, {}", curve.backend.label());
        let mut t = crate::tables::table(&[
            "waiters",
            "acquired",
            "s",
            "cmds/release",
            "join cmds/waiter",
            "next grant p50 µs",
            "p99 µs",
            "max µs",
            "attempts/release",
            "busy/release",
            "hand-overs",
            "µs/release",
            "client CPU µs/release",
            "server µs/release",
        ]);
        for p in &curve.points {
            t.add_row(vec![
                p.waiters.to_string(),
                p.acquired.to_string(),
                format!("{:.2}", p.seconds),
                format!("{:.2}", p.commands_per_release),
                format!("{:.2}", p.join_commands_per_waiter),
                format!("{:.0}", p.gap.p50_us),
                format!("{:.0}", p.gap.p99_us),
                format!("{:.0}", p.gap.max_us),
                format!("{:.2}", p.attempts_per_release),
                format!("{:.2}", p.busy_per_release),
                format!("{:.0} %", p.handover_share * 100.0),
                format!("{:.0}", p.us_per_release),
                format!("{:.0}", p.client_cpu_us_per_release),
                format!("{:.1}", p.server_cpu_us_per_release),
            ]);
        }
        println!("{t}");
        for (figure, v) in waiter_verdicts(&curve.points) {
            println!("  {figure}: {v}");
        }
        if let Some(why) = &curve.stopped {
            println!("  stopped {why}");
        }
    }
}

/// The targets the curves measure: 100,000 renewed locks on one Redis, 10,000 waiters.
pub(crate) fn targets(run: Option<&CurvesRun>) -> Vec<Target> {
    let Some(run) = run else { return Vec::new() };
    let mut t = Vec::new();
    let redis_held = run
        .held
        .iter()
        .find(|c| c.backend == CurveBackend::Redis)
        .and_then(|c| c.points.iter().find(|p| p.locks >= 100_000));
    if let Some(r) = redis_held {
        let p = HeldFigures::of(r);
        t.push(target(
            "C1 100k locks on Redis",
            "51",
            "client CPU (at 30 s leases) and RSS holding 100,000 renewed locks on one Redis",
            "≤ 5 % of a core, ≤ 256 MiB",
            format!(
                "{:.2} % ({:.2} % measured at {:.0} s leases), {:.1} MiB, {} lost",
                p.client_cpu_pct_30s, p.client_cpu_pct, r.lease_s, p.client_rss_mib, p.lost
            ),
            p.client_cpu_pct_30s <= 5.0 && p.client_rss_mib <= 256.0 && p.lost == 0,
        ));
    }
    let redis_waiters = run
        .waiters
        .iter()
        .find(|c| c.backend == CurveBackend::Redis)
        .map(|c| &c.points[..])
        .unwrap_or_default();
    if let (Some(first), Some(last)) = (
        redis_waiters.first(),
        redis_waiters.iter().find(|p| p.waiters >= 10_000),
    ) {
        // O(1): no more commands per release at 10,000 waiters than twice those at the fewest.
        let flat = last.commands_per_release <= 2.0 * first.commands_per_release.max(1.0);
        t.push(target(
            "C2 10k waiters on Redis",
            "51",
            "a release with 10,000 waiters: server commands and the next grant",
            "O(1) commands per release (≤ 2× those at the fewest waiters), next grant ≤ 10 ms p99",
            format!(
                "{:.2} commands per release ({:.2} at {} waiters), next grant p99 {:.2} ms",
                last.commands_per_release,
                first.commands_per_release,
                first.waiters,
                last.gap.p99_us / 1000.0
            ),
            flat && last.gap.p99_us <= 10_000.0 && last.acquired == last.waiters as u64,
        ));
    }
    t
}

/// Correctness failures of the curves: leases lost while renewing, waiters' errors.
pub(crate) fn failures(run: &CurvesRun, failures: &mut Vec<String>) {
    for curve in &run.held {
        for r in curve.points.iter().filter(|r| r.lost > 0) {
            failures.push(format!(
                "C1 {} {} locks: {} lost while renewing",
                curve.backend.label(),
                r.locks,
                r.lost
            ));
        }
    }
    for curve in &run.waiters {
        for p in &curve.points {
            if p.errors > 0 || p.exclusion_violations > 0 || p.acquired != p.waiters as u64 {
                failures.push(format!(
                    "C2 {} {} waiters: {} acquired, {} errors (first: {}), {} violations",
                    curve.backend.label(),
                    p.waiters,
                    p.acquired,
                    p.errors,
                    p.first_error.as_deref().unwrap_or("-"),
                    p.exclusion_violations
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_merges_the_segments() {
        let linear = [(1e3, 1.0), (1e4, 10.0), (1e5, 100.0)];
        assert_eq!(verdict(&linear), "linear 1k→100k (slope 1.00)");
        let bent = [(10.0, 5.0), (100.0, 5.0), (1e3, 5.0), (1e4, 500.0)];
        assert_eq!(
            verdict(&bent),
            "flat (O(1)) 10→1k (slope 0.00), then faster than linear 1k→10k (slope 2.00)"
        );
        assert_eq!(verdict(&[(1.0, 1.0)]), "too few points");
    }
}
