//! The record of one run (written as JSON) and the targets it is judged by.

use serde::Serialize;

use crate::benchmark::Baselines;
use crate::cli::Plan;
use crate::cycles::CycleRun;
use crate::fairness::{FAIR, FairnessRun, PLAIN};
use crate::handoff::HandoffRun;
use crate::kinds::{EXCLUSIVE, READ_WRITE, SharingRun};
use crate::postgres::PostgresRun;
use crate::procfs::Machine;
use crate::renewal::RenewalRun;
use crate::stale::StaleRun;
use crate::stats::ratio;
use crate::target::{Target, not_run, target};
use crate::waiters::WaitersRun;

pub(crate) use crate::labels::{
    BACKEND, DISTLOCK, DISTLOCK_TTL, HAND, HAND_FENCED, RSLOCK, UNFENCED, redlock_label,
    redlock_unfenced_label, rslock_label,
};

/// Everything a run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Run {
    pub(crate) tool: &'static str,
    pub(crate) version: &'static str,
    pub(crate) started_unix_s: u64,
    /// `git describe --always --dirty` of the workspace, when git can tell.
    pub(crate) commit: Option<String>,
    pub(crate) wall_s: f64,
    pub(crate) machine: Machine,
    pub(crate) redis_version: String,
    pub(crate) plan: Plan,
    pub(crate) baselines: Baselines,
    pub(crate) s1: Vec<CycleRun>,
    pub(crate) s2: Vec<CycleRun>,
    pub(crate) s3: Vec<HandoffRun>,
    /// distlock's Redlock and rslock over 3 and 5 servers.
    pub(crate) s4: Vec<CycleRun>,
    /// S4's counting passes: own leases still on a node, per client and node count.
    pub(crate) s4_stale: Vec<StaleRun>,
    pub(crate) s5: Option<RenewalRun>,
    pub(crate) s6: Option<WaitersRun>,
    /// The read-write lock, then the exclusive lock on the same workload.
    pub(crate) s7: Vec<SharingRun>,
    pub(crate) s8: Option<SharingRun>,
    /// Read leases of one name, then of as many names.
    pub(crate) s9: Vec<RenewalRun>,
    /// The plain mutex, then the fair lock, each over the same processes and tasks.
    pub(crate) s10: Vec<FairnessRun>,
    /// P1, P3 and P5 on PostgreSQL, with their pgbench baselines; P7, P8 and P10,
    /// the lock kinds on the lease table.
    pub(crate) postgres: Option<PostgresRun>,
    /// S1 and S2 on the run's redis-server and on a Valkey server, in alternating rounds
    /// (the Redis-and-Valkey comparison); empty when not run.
    pub(crate) servers: Vec<crate::servers::ServerRun>,
    /// E1, E2, E3, E5 and the failover on etcd.
    pub(crate) etcd: Option<crate::etcd::EtcdRun>,
    /// M1 and M2 on MariaDB.
    pub(crate) mysql: Option<crate::mysql::MysqlRun>,
    /// O1, O2, the takeover and O5 on object storage.
    pub(crate) object_store: Option<crate::objstore::ObjStoreRun>,
    /// The cost curves (C1, C2), when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) curves: Option<crate::curve_plan::CurvesRun>,
    pub(crate) targets: Vec<Target>,
    /// Correctness failures and errors: a run with any is not a valid measurement.
    pub(crate) failures: Vec<String>,
}

/// An S3 target: id, what, goal, and how a run measures up to it.
type S3Target = (
    &'static str,
    &'static str,
    &'static str,
    fn(&HandoffRun) -> (String, bool),
);

/// `git describe --always --dirty` of the workspace the tool was built from, if git can tell.
pub(crate) fn commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}

impl Run {
    pub(crate) fn cycle<'a>(runs: &'a [CycleRun], client: &str) -> Option<&'a CycleRun> {
        runs.iter().find(|r| r.client == client)
    }

    pub(crate) fn handoff(&self, client: &str) -> Option<&HandoffRun> {
        self.s3.iter().find(|r| r.client == client)
    }

    pub(crate) fn fairness(&self, client: &str) -> Option<&FairnessRun> {
        self.s10.iter().find(|r| r.client == client)
    }

    pub(crate) fn sharing(&self, client: &str) -> Option<&SharingRun> {
        self.s7.iter().find(|r| r.client == client)
    }

    /// S7's acquisitions/s of the read-write lock over those of the exclusive lock.
    pub(crate) fn s7_ratio(&self) -> Option<f64> {
        let (rw, exclusive) = (self.sharing(READ_WRITE)?, self.sharing(EXCLUSIVE)?);
        Some(ratio(rw.per_second, exclusive.per_second))
    }

    /// Judges the run against every target.
    pub(crate) fn judge(&mut self) {
        let mut t = Vec::new();
        let s1 = Self::cycle(&self.s1, DISTLOCK);
        let s1_hand = Self::cycle(&self.s1, HAND);
        let limit = self.baselines.round_trip_limit_per_s;
        t.push(match (s1, limit) {
            (Some(s1), Some(limit)) => {
                let share = ratio(s1.per_second, limit);
                target(
                    "S1 vs limit",
                    "7",
                    "S1 cycles/s against the one-connection round-trip limit",
                    "≥ 90 %",
                    format!(
                        "{:.0} % ({:.0} of {:.0}/s)",
                        share * 100.0,
                        s1.per_second,
                        limit
                    ),
                    share >= 0.90,
                )
            }
            _ => not_run(
                "S1 vs limit",
                "7",
                "S1 cycles/s against the one-connection round-trip limit",
                "≥ 90 %",
            ),
        });
        let vs_hand = |id: &'static str, what: &'static str, client: &str| match (
            Self::cycle(&self.s1, client),
            s1_hand,
        ) {
            (Some(s1), Some(hand)) => target(
                id,
                "7",
                what,
                "≥ 100 %",
                format!(
                    "{:.0} % ({:.0} vs {:.0}/s)",
                    ratio(s1.per_second, hand.per_second) * 100.0,
                    s1.per_second,
                    hand.per_second
                ),
                s1.per_second >= hand.per_second,
            ),
            _ => not_run(id, "7", what, "≥ 100 %"),
        };
        t.push(vs_hand(
            "S1 vs hand-written",
            "S1 cycles/s against the hand-written lock",
            DISTLOCK,
        ));
        t.push(vs_hand(
            "S1 no fencing vs hand-written",
            "the same with fencing(false), which does what the hand-written lock does",
            UNFENCED,
        ));
        let s2 = Self::cycle(&self.s2, DISTLOCK);
        t.push(match (s2, self.baselines.pipelined_ceiling_per_s) {
            (Some(s2), Some(ceiling)) => {
                let share = ratio(s2.per_second, ceiling);
                target(
                    "S2 vs ceiling",
                    "7",
                    "S2 cycles/s (32 tasks) against the pipelined ceiling",
                    "≥ 80 %",
                    format!(
                        "{:.0} % ({:.0} of {:.0}/s)",
                        share * 100.0,
                        s2.per_second,
                        ceiling
                    ),
                    share >= 0.80,
                )
            }
            _ => not_run(
                "S2 vs ceiling",
                "7",
                "S2 cycles/s (32 tasks) against the pipelined ceiling",
                "≥ 80 %",
            ),
        });
        let s3 = self.handoff(DISTLOCK);
        let s3_targets: [S3Target; 5] = [
            (
                "S3 gap mean",
                "handoff gap mean (8 workers, 1 ms hold)",
                "≤ 120 µs",
                |r| (format!("{:.0} µs", r.gap.mean_us), r.gap.mean_us <= 120.0),
            ),
            ("S3 gap p99", "handoff gap p99", "≤ 250 µs", |r| {
                (format!("{:.0} µs", r.gap.p99_us), r.gap.p99_us <= 250.0)
            }),
            (
                "S3 commands",
                "server commands per acquisition (inside scripts too)",
                "≤ 6",
                |r| {
                    (
                        format!("{:.2}", r.cost.commands_per_op),
                        r.cost.commands_per_op <= 6.0,
                    )
                },
            ),
            (
                "S3 self-handoff",
                "share of grants won by the worker that just released",
                "≤ 20 %",
                |r| {
                    (
                        format!("{:.1} %", r.self_handoff * 100.0),
                        r.self_handoff <= 0.20,
                    )
                },
            ),
            (
                "S3 lost updates",
                "non-atomic counter under the lock ends exact",
                "0 lost",
                |r| {
                    (
                        format!("{} lost of {}", r.lost_updates, r.total_acquisitions),
                        r.lost_updates == 0 && r.exclusion_violations == 0,
                    )
                },
            ),
        ];
        for (id, what, goal, judge) in s3_targets {
            t.push(match s3 {
                Some(r) => {
                    let (measured, met) = judge(r);
                    target(id, "3, 7", what, goal, measured, met)
                }
                None => not_run(id, "3, 7", what, goal),
            });
        }
        let commands = |r: &HandoffRun| {
            (
                format!("{:.2}", r.cost.commands_per_op),
                r.cost.commands_per_op <= 6.0,
            )
        };
        let what = "the same with fencing(false): no clock read, no counter";
        t.push(match self.handoff(UNFENCED) {
            Some(r) => {
                let (measured, met) = commands(r);
                target(
                    "S3 commands, no fencing",
                    "3, 7",
                    what,
                    "≤ 6",
                    measured,
                    met,
                )
            }
            None => not_run("S3 commands, no fencing", "3, 7", what, "≤ 6"),
        });
        let redlock5 = Self::cycle(&self.s4, &redlock_label(5));
        t.push(match (redlock5, s1) {
            (Some(r5), Some(s1)) => {
                let x = ratio(r5.latency.p50_us, s1.latency.p50_us);
                target(
                    "S4 Redlock ×5",
                    "4, 7",
                    "Redlock over 5 nodes: uncontended p50 against single-instance",
                    "≤ 1.25×",
                    format!(
                        "{x:.2}× ({:.0} vs {:.0} µs)",
                        r5.latency.p50_us, s1.latency.p50_us
                    ),
                    x <= 1.25,
                )
            }
            _ => not_run(
                "S4 Redlock ×5",
                "4, 7",
                "Redlock over 5 nodes: uncontended p50 against single-instance",
                "≤ 1.25×",
            ),
        });
        let s5 = self.s5.as_ref();
        t.push(match s5 {
            Some(r) => target(
                "S5 memory",
                "3, 7",
                "RSS of a process holding 10,000 renewed locks",
                "≤ 64 MB",
                format!("{:.1} MiB ({} locks)", r.memory_held.rss, r.locks),
                r.memory_held.rss <= 64.0 && r.lost == 0,
            ),
            None => not_run(
                "S5 memory",
                "3, 7",
                "RSS of a process holding 10,000 renewed locks",
                "≤ 64 MB",
            ),
        });
        t.push(match s5 {
            Some(r) => target(
                "S5 CPU",
                "3, 7",
                "CPU spent renewing them, 30 s lease",
                "≤ 5 % of a core",
                format!(
                    "{:.2} % ({:.2} % measured at a {:.0} s lease)",
                    r.cpu_share_at_30s_lease * 100.0,
                    r.cpu_share * 100.0,
                    r.lease_s
                ),
                r.cpu_share_at_30s_lease <= 0.05,
            ),
            None => not_run(
                "S5 CPU",
                "3, 7",
                "CPU spent renewing them, 30 s lease",
                "≤ 5 % of a core",
            ),
        });
        t.push(match &self.s6 {
            Some(r) => target(
                "S6 subscriptions",
                "3, 7",
                "1,000 waiters on one name: subscriptions on the server",
                "1",
                format!(
                    "{} (channel subscribers), {} pub/sub connection(s)",
                    r.max_channel_subscribers, r.max_pubsub_connections
                ),
                r.max_channel_subscribers == 1 && r.max_pubsub_connections == 1,
            ),
            None => not_run(
                "S6 subscriptions",
                "3, 7",
                "1,000 waiters on one name: subscriptions on the server",
                "1",
            ),
        });
        self.judge_peers(&mut t);
        t.extend(crate::servers::targets(&self.servers));
        self.judge_kinds(&mut t);
        self.judge_fairness(&mut t);
        t.extend(crate::postgres::targets(self.postgres.as_ref()));
        t.extend(crate::etcd::targets(self.etcd.as_ref()));
        t.extend(crate::curve_report::targets(self.curves.as_ref()));
        self.targets = t;
    }

    /// The peer targets: distlock against the simplest alternatives, measured in the
    /// same run (the hand-written lock, rslock).
    fn judge_peers(&self, t: &mut Vec<Target>) {
        let versus = |(id, issues): (&'static str, &'static str),
                      what: &'static str,
                      rows: &[CycleRun],
                      ours: &str,
                      theirs: &str,
                      (goal, shown): (f64, &'static str)| {
            match (Self::cycle(rows, ours), Self::cycle(rows, theirs)) {
                (Some(a), Some(b)) => {
                    let x = ratio(a.per_second, b.per_second);
                    target(
                        id,
                        issues,
                        what,
                        shown,
                        format!("{x:.2}× ({:.0} vs {:.0}/s)", a.per_second, b.per_second),
                        x >= goal,
                    )
                }
                _ => not_run(id, issues, what, shown),
            }
        };
        t.push(versus(
            ("S1 fenced vs hand", "15"),
            "S1 cycles/s, distlock (fenced) against the hand-written lock",
            &self.s1,
            DISTLOCK,
            HAND,
            (0.9, "≥ 0.9×"),
        ));
        t.push(versus(
            ("S1 no fencing vs hand", "15"),
            "S1 cycles/s, fencing(false) against the hand-written lock",
            &self.s1,
            UNFENCED,
            HAND,
            (1.0, "≥ 1.0×"),
        ));
        t.push(versus(
            ("S2 fenced vs hand", "15"),
            "S2 cycles/s (32 tasks), distlock (fenced) against the hand-written lock",
            &self.s2,
            DISTLOCK,
            HAND,
            (0.6, "≥ 0.6×"),
        ));
        t.push(versus(
            ("S2 no fencing vs hand", "15"),
            "S2 cycles/s, fencing(false) against the hand-written lock",
            &self.s2,
            UNFENCED,
            HAND,
            (1.0, "≥ 1.0×"),
        ));
        // Issue 15 asked ≥ 1.0× of rslock for the fenced Redlock; issue 38 set the bar at 0.9×
        // for it (a fenced grant is a script on every node; rslock's is a plain `SET NX PX`)
        // and at 1.0× for `fencing(false)`, which sends what rslock sends.
        for nodes in [3, 5] {
            let theirs = rslock_label(nodes);
            let (fenced, unfenced) = if nodes == 3 {
                (
                    "S4 Redlock vs rslock, 3 nodes",
                    "S4 Redlock no fencing vs rslock, 3 nodes",
                )
            } else {
                (
                    "S4 Redlock vs rslock, 5 nodes",
                    "S4 Redlock no fencing vs rslock, 5 nodes",
                )
            };
            t.push(versus(
                (fenced, "15, 38"),
                "S4 cycles/s, distlock's fenced Redlock against rslock on the same nodes",
                &self.s4,
                &redlock_label(nodes),
                &theirs,
                (0.9, "≥ 0.9×"),
            ));
            t.push(versus(
                (unfenced, "38"),
                "S4 cycles/s, distlock's Redlock with fencing(false) against rslock",
                &self.s4,
                &redlock_unfenced_label(nodes),
                &theirs,
                (1.0, "≥ 1.0×"),
            ));
        }
        let what = "S3 handoff gap from the holder's release call, mean and p99, against the hand-written lock's";
        t.push(match (self.handoff(DISTLOCK), self.handoff(HAND)) {
            (Some(d), Some(h)) => target(
                "S3 gap from the call vs hand",
                "15",
                what,
                "≤ hand-written",
                format!(
                    "mean {:.0} vs {:.0} µs, p99 {:.0} vs {:.0} µs",
                    d.gap_from_call.mean_us,
                    h.gap_from_call.mean_us,
                    d.gap_from_call.p99_us,
                    h.gap_from_call.p99_us
                ),
                d.gap_from_call.mean_us <= h.gap_from_call.mean_us
                    && d.gap_from_call.p99_us <= h.gap_from_call.p99_us,
            ),
            _ => not_run("S3 gap from the call vs hand", "15", what, "≤ hand-written"),
        });
    }

    /// The targets of the read-write lock and the semaphore (S7, S8, S9).
    fn judge_kinds(&self, t: &mut Vec<Target>) {
        let what = "S7 acquisitions/s, read-write lock against the exclusive lock (90 % reads)";
        t.push(
            match (
                self.s7_ratio(),
                self.sharing(READ_WRITE),
                self.sharing(EXCLUSIVE),
            ) {
                (Some(x), Some(rw), Some(ex)) => target(
                    "S7 read-write vs exclusive",
                    "13",
                    what,
                    "≥ 3×",
                    format!("{x:.2}× ({:.0} vs {:.0}/s)", rw.per_second, ex.per_second),
                    x >= 3.0,
                ),
                _ => not_run("S7 read-write vs exclusive", "13", what, "≥ 3×"),
            },
        );
        let what = "S7: no writer beside anyone, no lost write; readers overlap";
        t.push(match self.sharing(READ_WRITE) {
            Some(r) => target(
                "S7 exclusion",
                "13",
                what,
                "0 violations",
                format!(
                    "{} violations, {} lost of {} writes, up to {} readers at once",
                    r.violations, r.lost_updates, r.total_writes, r.max_shared
                ),
                !r.failed() && r.max_shared > 1,
            ),
            None => not_run("S7 exclusion", "13", what, "0 violations"),
        });
        let what = "S8: permits in use at once, 32 tasks on 8 permits";
        t.push(match &self.s8 {
            Some(r) => target(
                "S8 permits",
                "13",
                what,
                "≤ 8, never more",
                format!("up to {}, {} violations", r.max_shared, r.violations),
                !r.failed(),
            ),
            None => not_run("S8 permits", "13", what, "≤ 8, never more"),
        });
    }

    /// The target of the fair lock (S10).
    fn judge_fairness(&self, t: &mut Vec<Target>) {
        let what =
            "S10: acquisitions per process, 4 processes × 4 tasks on one name, most over fewest";
        let spread = |r: &FairnessRun| {
            r.process_max_min
                .map_or_else(|| "∞".to_owned(), |x| format!("{x:.2}"))
        };
        t.push(match self.fairness(FAIR) {
            Some(r) => target(
                "S10 fair max/min",
                "17",
                what,
                "≤ 1.1",
                format!(
                    "{} ({}; plain lock: {})",
                    spread(r),
                    counts(&r.per_process),
                    self.fairness(PLAIN)
                        .map_or_else(|| "not run".to_owned(), spread)
                ),
                r.process_max_min.is_some_and(|x| x <= 1.1),
            ),
            None => not_run("S10 fair max/min", "17", what, "≤ 1.1"),
        });
    }

    /// Correctness problems, gathered from every part.
    pub(crate) fn check(&mut self) {
        let mut failures = Vec::new();
        let (p1, p3, p5) = self
            .postgres
            .as_ref()
            .map_or((&[][..], &[][..], None), |p| {
                (&p.p1[..], &p.p3[..], p.p5.as_ref())
            });
        let (p7, p8, p10) = self
            .postgres
            .as_ref()
            .map_or((&[][..], None, &[][..]), |p| {
                (&p.p7[..], p.p8.as_ref(), &p.p10[..])
            });
        for r in self.s4_stale.iter().filter(|r| r.errors > 0) {
            failures.push(format!(
                "S4 counting pass {}: {} errors (first: {})",
                r.client,
                r.errors,
                r.first_error.as_deref().unwrap_or("?")
            ));
        }
        for r in self.s1.iter().chain(&self.s2).chain(&self.s4).chain(p1) {
            if r.errors > 0 {
                failures.push(format!(
                    "{} {}: {} errors (first: {})",
                    r.scenario,
                    r.client,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("?")
                ));
            }
        }
        for (scenario, r) in self
            .s3
            .iter()
            .map(|r| ("S3", r))
            .chain(p3.iter().map(|r| ("P3", r)))
        {
            if r.errors > 0 || r.lost_updates > 0 || r.exclusion_violations > 0 {
                failures.push(format!(
                    "{scenario} {}: {} errors (first: {}), {} lost updates, {} exclusion violations",
                    r.client,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("-"),
                    r.lost_updates,
                    r.exclusion_violations
                ));
            }
        }
        for r in self.s5.iter().chain(&self.s9).chain(p5) {
            if r.lost > 0 {
                failures.push(format!(
                    "{}: {} of {} leases ({}) lost while renewing",
                    r.scenario(),
                    r.lost,
                    r.locks,
                    r.kind.describe()
                ));
            }
        }
        for r in self.s7.iter().chain(&self.s8).chain(p7).chain(p8) {
            if r.failed() {
                failures.push(format!(
                    "{} {}: {} errors (first: {}), {} lost updates, {} violations",
                    r.scenario,
                    r.client,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("-"),
                    r.lost_updates,
                    r.violations
                ));
            }
        }
        for r in self.s10.iter().chain(p10) {
            if r.failed() {
                failures.push(format!(
                    "{} {}: {} errors (first: {}), {} lost updates, {} exclusion violations, \
                     {} duplicate fencing tokens",
                    r.scenario,
                    r.client,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("-"),
                    r.lost_updates,
                    r.exclusion_violations,
                    r.duplicate_tokens
                ));
            }
        }
        if let Some(r) = &self.s6
            && (r.errors > 0 || r.lost_updates > 0 || r.exclusion_violations > 0)
        {
            failures.push(format!(
                "S6: {} errors (first: {}), {} lost updates, {} exclusion violations",
                r.errors,
                r.first_error.as_deref().unwrap_or("-"),
                r.lost_updates,
                r.exclusion_violations
            ));
        }
        if let Some(etcd) = &self.etcd {
            etcd_failures(etcd, &mut failures);
        }
        if let Some(mysql) = &self.mysql {
            for r in mysql.m1.iter().chain(&mysql.m2).filter(|r| r.errors > 0) {
                failures.push(format!(
                    "{} {}: {} errors (first: {})",
                    r.scenario,
                    r.client,
                    r.errors,
                    r.first_error.as_deref().unwrap_or("-")
                ));
            }
        }
        if let Some(object_store) = &self.object_store {
            crate::objstore::failures(object_store, &mut failures);
        }
        if let Some(curves) = &self.curves {
            crate::curve_report::failures(curves, &mut failures);
        }
        self.failures.extend(failures);
    }
}

/// `285 / 64 / 124 / 100`.
pub(crate) fn counts(counts: &[u64]) -> String {
    counts
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The errors, lost updates and lost leases of the etcd parts.
fn etcd_failures(etcd: &crate::etcd::EtcdRun, failures: &mut Vec<String>) {
    for r in etcd.e1.iter().chain(&etcd.e2).filter(|r| r.errors > 0) {
        failures.push(format!(
            "{} {}: {} errors (first: {})",
            r.scenario,
            r.client,
            r.errors,
            r.first_error.as_deref().unwrap_or("?")
        ));
    }
    if let Some(r) = &etcd.e3
        && (r.errors > 0 || r.lost_updates > 0 || r.exclusion_violations > 0)
    {
        failures.push(format!(
            "E3 {}: {} errors (first: {}), {} lost updates, {} exclusion violations",
            r.client,
            r.errors,
            r.first_error.as_deref().unwrap_or("-"),
            r.lost_updates,
            r.exclusion_violations
        ));
    }
    if let Some(r) = &etcd.e5
        && r.lost > 0
    {
        failures.push(format!(
            "E5: {} of {} leases lost while renewing",
            r.lost, r.locks
        ));
    }
}
