//! P1, P3 and P5, the PostgreSQL scenarios: S1, S3 and S5 on PostgreSQL, in both of lock-postgres's modes —
//! the lease table (`PostgresLock`) and session advisory locks (`PostgresAdvisoryLock`) — with
//! S1's and S3's own machinery ([`crate::cycles`], [`crate::handoff`]) and S5's child process
//! ([`crate::renewal`]), on one throwaway server started with `pg_stat_statements`, so the probe
//! counts every statement a cycle costs.
//!
//! P7, P8 and P10: the lock kinds on the lease table — S7 (read-write against exclusive), S8
//! (semaphore) and S10 (plain and fair lock across processes), with their own code
//! ([`crate::kinds`], [`crate::fairness`]) on a `PostgresLock`; P10's counter stays on Redis.
//!
//! The limit P1 is judged against is `pgbench` on the same server, in the same run, one
//! connection, prepared statements: the lease table's own acquire and release statements (read
//! from lock-postgres's `sql.rs`, a fixed name and a random token), and a bare
//! `pg_try_advisory_lock` + `pg_advisory_unlock` cycle. P1 interleaves them with its clients in
//! S1's rounds.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use lock_core::Locker;
use lock_postgres::{PostgresAdvisoryLock, PostgresLock};
use lock_testkit::PostgresServer;
use serde::Serialize;
use tokio::runtime::Runtime;

use crate::cli::{Part, Plan};
use crate::cycles::{self, Client, CycleRun};
use crate::fairness::{self, FairnessRun};
use crate::handoff::{self, Contender, HandoffRun};
use crate::info::{Cost, Probe};
use crate::kinds::{self, SharingRun, Workload};
use crate::progress::Progress;
use crate::renewal::{self, Backend, HeldLeases, RenewalRun};
use crate::stats::ratio;
use crate::step::{block, slug};
use crate::target::{Target, not_run, target};
use crate::window::Timing;

/// distlock on the lease table, through its `Locker`.
pub(crate) const TABLE: &str = "distlock postgres (table)";
/// distlock on session advisory locks, through its `Locker`.
pub(crate) const ADVISORY: &str = "distlock postgres (advisory)";
/// distlock on the lease table with `prepared_statements(false)` (what a transaction-mode
/// PgBouncer before 1.21 needs): every statement unnamed, parsed and planned on each call.
pub(crate) const TABLE_UNPREPARED: &str = "distlock postgres (table, unprepared)";
/// Who runs P3, in this order.
pub(crate) const CLIENTS: [&str; 2] = [TABLE, ADVISORY];
/// Who runs P1, in this order: P3's clients and the lease table without prepared statements.
pub(crate) const P1_CLIENTS: [&str; 3] = [TABLE, TABLE_UNPREPARED, ADVISORY];

/// lock-postgres's statements, as they are compiled into it.
const SQL_RS: &str = include_str!("../../../../lock-postgres/src/sql.rs");

/// The lock name of the pgbench scripts.
const BENCH_NAME: &str = "'p1-pgbench'";

/// The bare statements pgbench runs as a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Script {
    /// `ACQUIRE` then `RELEASE` of lock-postgres's `sql.rs`, a fixed name, a random token.
    LeaseTable,
    /// `SELECT pg_try_advisory_lock(42); SELECT pg_advisory_unlock(42);`
    Advisory,
}

impl Script {
    pub(crate) const ALL: [Script; 2] = [Script::LeaseTable, Script::Advisory];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::LeaseTable => "lease table: ACQUIRE + RELEASE statements",
            Self::Advisory => "pg_try_advisory_lock + pg_advisory_unlock",
        }
    }

    /// The client judged against it.
    pub(crate) fn client(self) -> &'static str {
        match self {
            Self::LeaseTable => TABLE,
            Self::Advisory => ADVISORY,
        }
    }

    /// The pgbench script.
    fn text(self) -> Result<String, String> {
        Ok(match self {
            Self::LeaseTable => {
                let token = "md5(:r::text)";
                let acquire = statement("ACQUIRE")?
                    .replace("$1", BENCH_NAME)
                    .replace("$2", token)
                    .replace("$3", &cycles::TTL.as_millis().to_string());
                let release = statement("RELEASE")?
                    .replace("$1", BENCH_NAME)
                    .replace("$2", token)
                    .replace("$3", &format!("'{}'", lock_postgres::CHANNEL));
                format!("\\set r random(1, 1000000000)\n{acquire};\n{release};\n")
            }
            Self::Advisory => {
                "SELECT pg_try_advisory_lock(42);\nSELECT pg_advisory_unlock(42);\n".to_owned()
            }
        })
    }
}

/// The text of the constant `name` of lock-postgres's `sql.rs` (a `"\`-continued string).
fn statement(name: &str) -> Result<String, String> {
    let start = format!("pub(crate) const {name}: &str = \"\\\n");
    let at = SQL_RS
        .find(&start)
        .ok_or_else(|| format!("lock-postgres's sql.rs has no statement {name}"))?;
    let rest = &SQL_RS[at + start.len()..];
    let end = rest
        .find("\";")
        .ok_or_else(|| format!("lock-postgres's sql.rs: {name} does not end"))?;
    Ok(rest[..end].trim_end().to_owned())
}

/// pgbench's runs of one script (P1's rounds), merged.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PgBench {
    pub(crate) script: &'static str,
    /// The client judged against it.
    pub(crate) client: &'static str,
    /// The command line, connection options and file left out.
    pub(crate) command: String,
    /// The script file.
    pub(crate) text: String,
    pub(crate) transactions: u64,
    pub(crate) seconds: f64,
    /// Transactions (script runs: acquire + release cycles) per second, over the rounds.
    pub(crate) tps: f64,
    /// pgbench's `latency average`, the mean of the rounds.
    pub(crate) latency_avg_us: f64,
    /// Statements per transaction and their planning + execution time (`pg_stat_statements`);
    /// its CPU figures mean nothing (pgbench's backend has exited when the probe looks).
    pub(crate) cost: Cost,
}

/// Everything P1, P3, P5, P7, P8 and P10 measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PostgresRun {
    /// `server_version`.
    pub(crate) version: String,
    pub(crate) pgbench: Vec<PgBench>,
    pub(crate) p1: Vec<CycleRun>,
    pub(crate) p3: Vec<HandoffRun>,
    pub(crate) p5: Option<RenewalRun>,
    /// S7 on the lease table: the read-write lock, then the exclusive lock.
    pub(crate) p7: Vec<SharingRun>,
    /// S8 on the lease table.
    pub(crate) p8: Option<SharingRun>,
    /// S10 on the lease table: the plain mutex, then the fair lock.
    pub(crate) p10: Vec<FairnessRun>,
}

impl PostgresRun {
    /// P7's acquisitions/s of the read-write lock over those of the exclusive lock.
    pub(crate) fn p7_ratio(&self) -> Option<f64> {
        let find = |client| self.p7.iter().find(|r| r.client == client);
        let (rw, exclusive) = (find(kinds::READ_WRITE)?, find(kinds::EXCLUSIVE)?);
        Some(ratio(rw.per_second, exclusive.per_second))
    }

    /// The pgbench run `client` is judged against, and its P1 run.
    pub(crate) fn against_bare(&self, client: &str) -> Option<(&CycleRun, &PgBench)> {
        let script = match client {
            ADVISORY => Script::Advisory,
            _ => Script::LeaseTable,
        };
        Some((
            self.p1.iter().find(|r| r.client == client)?,
            self.pgbench.iter().find(|b| b.script == script.name())?,
        ))
    }
}

/// pgbench beside the server's binaries.
fn pgbench_binary() -> Result<PathBuf, String> {
    let dir = lock_testkit::postgres_bin_dir().map_err(|e| e.to_string())?;
    let binary = dir.join("pgbench");
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!("no pgbench in {}", dir.display()))
    }
}

/// Starts the server and runs the PostgreSQL parts of `plan`; P10 keeps its counter on the
/// Redis at `counter_url`.
pub(crate) fn run(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
    counter_url: Option<&str>,
) -> Result<PostgresRun, String> {
    progress.next();
    let server = PostgresServer::builder()
        .setting("shared_preload_libraries", "pg_stat_statements")
        .setting("pg_stat_statements.track_planning", "on")
        .start()
        .map_err(|e| format!("starting PostgreSQL: {e}"))?;
    let url = server.url();
    let mut probe = block(runtime, Duration::ZERO, Probe::postgres(&url, server.pid()))?
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let version = block(runtime, Duration::ZERO, probe.postgres_version())?
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    block(runtime, Duration::ZERO, async {
        table_lock(&url)?.migrate().await.map_err(|e| e.to_string())
    })??;
    let mut out = PostgresRun {
        version,
        pgbench: Vec::new(),
        p1: Vec::new(),
        p3: Vec::new(),
        p5: None,
        p7: Vec::new(),
        p8: None,
        p10: Vec::new(),
    };
    if plan.has(Part::P1) {
        let scripts = Scripts::write()?;
        let result = p1(
            plan,
            runtime,
            progress,
            &url,
            server.port(),
            &scripts,
            &mut probe,
        );
        scripts.remove();
        (out.pgbench, out.p1) = result?;
    }
    if plan.has(Part::P3) {
        for label in CLIENTS {
            progress.next();
            let contender = Contender::Locker(locker(label, &url)?);
            out.p3.push(block(
                runtime,
                plan.contention.warmup + plan.contention.measure,
                handoff::run(
                    label,
                    contender,
                    &format!("p3:{}", slug(label)),
                    plan.s3_workers,
                    plan.s3_hold,
                    plan.contention,
                    &mut probe,
                ),
            )??);
        }
    }
    if plan.has(Part::P5) {
        progress.next();
        let params = renewal::Params {
            kind: HeldLeases::Locks,
            backend: Backend::PostgresTable,
            locks: plan.s5_locks,
            lease_ms: u64::try_from(plan.s5_lease.as_millis()).unwrap_or(u64::MAX),
            periods: plan.s5_periods,
            server_pid: None,
        };
        out.p5 = Some(renewal::run(&url, plan.runtime.as_arg(), params)?);
    }
    // S7 and S8's code on a `Locker` of the lease table, under the names P7 and P8.
    let mut sharing = |progress: &mut Progress, workload: Workload, tasks| {
        progress.next();
        let scenario = if workload.scenario() == "S8" {
            "P8"
        } else {
            "P7"
        };
        let name = format!("{scenario}:{}", slug(workload.label())).to_lowercase();
        let mut run = block(
            runtime,
            plan.contention.warmup + plan.contention.measure,
            kinds::run(
                workload,
                Locker::new(table_lock(&url)?),
                &name,
                tasks,
                plan.s3_hold,
                plan.contention,
                &mut probe,
            ),
        )??;
        run.scenario = scenario;
        Ok::<_, String>(run)
    };
    if plan.has(Part::P7) {
        for workload in crate::s7_workloads(plan) {
            out.p7.push(sharing(progress, workload, plan.s7_tasks)?);
        }
    }
    if plan.has(Part::P8) {
        let workload = Workload::Semaphore {
            max: plan.s8_permits,
        };
        out.p8 = Some(sharing(progress, workload, plan.s8_tasks)?);
    }
    if plan.has(Part::P10) {
        let setup = fairness::Setup {
            scenario: "P10",
            backend: Backend::PostgresTable,
            url: &url,
            counter_url: counter_url.ok_or("P10: no Redis server for the counter")?,
            runtime: plan.runtime.as_arg(),
            processes: plan.s10_processes,
            tasks: plan.s10_tasks,
            hold: plan.s3_hold,
            timing: plan.contention,
        };
        for asked in crate::S10_ASKED {
            progress.next();
            out.p10
                .push(fairness::run(runtime, &mut probe, setup, asked)?);
        }
    }
    drop(probe);
    drop(server);
    Ok(out)
}

/// P1: rounds of pgbench on each script, then each client's window; like S1's.
fn p1(
    plan: &Plan,
    runtime: &Runtime,
    progress: &mut Progress,
    url: &str,
    port: u16,
    scripts: &Scripts,
    probe: &mut Probe,
) -> Result<(Vec<PgBench>, Vec<CycleRun>), String> {
    let bench = pgbench_binary()?;
    let made: Vec<Client> = P1_CLIENTS
        .iter()
        .map(|label| Ok(Client::Locker(locker(label, url)?, None)))
        .collect::<Result<_, String>>()?;
    let timing = Timing {
        warmup: plan.cycles.warmup / plan.s1_rounds,
        measure: plan.cycles.measure / plan.s1_rounds,
    };
    let bench_secs =
        (timing.measure.as_secs() + u64::from(timing.measure.subsec_nanos() > 0)).max(1);
    let mut benches: Vec<Vec<PgBench>> = Script::ALL.iter().map(|_| Vec::new()).collect();
    let mut windows: Vec<Vec<cycles::Window>> = P1_CLIENTS.iter().map(|_| Vec::new()).collect();
    for _ in 0..plan.s1_rounds {
        for (i, script) in Script::ALL.into_iter().enumerate() {
            progress.next();
            let before =
                block(runtime, Duration::ZERO, probe.snapshot())?.map_err(|e| e.to_string())?;
            let mut run = pgbench(&bench, port, script, scripts, bench_secs)?;
            let after =
                block(runtime, Duration::ZERO, probe.snapshot())?.map_err(|e| e.to_string())?;
            run.cost = before.cost_until(&after, run.transactions);
            benches[i].push(run);
        }
        for (i, (label, client)) in P1_CLIENTS.iter().zip(&made).enumerate() {
            progress.next();
            windows[i].push(block(
                runtime,
                timing.warmup + timing.measure,
                cycles::measure(
                    label,
                    client.clone(),
                    &format!("p1:{}", slug(label)),
                    1,
                    timing,
                    probe,
                ),
            )??);
        }
    }
    let benches = benches.iter().filter_map(|runs| merge(runs)).collect();
    let runs = P1_CLIENTS
        .iter()
        .zip(windows)
        .map(|(label, w)| CycleRun::from_windows("P1", label, 1, w))
        .collect();
    Ok((benches, runs))
}

/// The `Locker` of a P1/P3 client, on a lock of its own (its own pool).
fn locker(label: &str, url: &str) -> Result<Locker, String> {
    Ok(match label {
        ADVISORY => Locker::new(
            PostgresAdvisoryLock::builder()
                .url(url)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        TABLE_UNPREPARED => Locker::new(
            PostgresLock::builder()
                .url(url)
                .prepared_statements(false)
                .build()
                .map_err(|e| e.to_string())?,
        ),
        _ => Locker::new(table_lock(url)?),
    })
}

fn table_lock(url: &str) -> Result<PostgresLock, String> {
    PostgresLock::builder()
        .url(url)
        .build()
        .map_err(|e| e.to_string())
}

/// The script files, in a directory of their own for the run.
struct Scripts {
    dir: PathBuf,
}

impl Scripts {
    fn write() -> Result<Self, String> {
        let dir = std::env::temp_dir().join(format!("distlock-loadtool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let scripts = Self { dir };
        for script in Script::ALL {
            let path = scripts.path(script);
            std::fs::write(&path, script.text()?)
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
        Ok(scripts)
    }

    fn path(&self, script: Script) -> PathBuf {
        self.dir.join(match script {
            Script::LeaseTable => "lease-table.sql",
            Script::Advisory => "advisory.sql",
        })
    }

    fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One pgbench run of `script`, one connection, `seconds` long. Blocking.
fn pgbench(
    binary: &Path,
    port: u16,
    script: Script,
    scripts: &Scripts,
    seconds: u64,
) -> Result<PgBench, String> {
    let args = [
        "-n".to_owned(),
        "-c".into(),
        "1".into(),
        "-j".into(),
        "1".into(),
        "-T".into(),
        seconds.to_string(),
        "-M".into(),
        "prepared".into(),
    ];
    let output = Command::new(binary)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
        .args(&args)
        .arg("-f")
        .arg(scripts.path(script))
        .arg("postgres")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running pgbench: {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "pgbench ({}) failed ({}): {}",
            script.name(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let parsed = parse_pgbench(&text).ok_or_else(|| format!("pgbench's output: {text}"))?;
    Ok(PgBench {
        script: script.name(),
        client: script.client(),
        command: format!("pgbench {} -f <script>", args.join(" ")),
        text: script.text()?,
        transactions: parsed.0,
        seconds: ratio(parsed.0 as f64, parsed.1),
        tps: parsed.1,
        latency_avg_us: parsed.2,
        cost: Cost::default(),
    })
}

/// (transactions, tps, latency average µs) from pgbench's report.
fn parse_pgbench(text: &str) -> Option<(u64, f64, f64)> {
    let after = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
    };
    let transactions = after("number of transactions actually processed:")?
        .split('/')
        .next()?
        .parse()
        .ok()?;
    let tps = after("tps =")?.parse().ok()?;
    let latency_ms: f64 = after("latency average =")?.parse().ok()?;
    Some((transactions, tps, latency_ms * 1e3))
}

/// Several rounds of one script as one: transactions over total time.
fn merge(runs: &[PgBench]) -> Option<PgBench> {
    let first = runs.first()?;
    let transactions: u64 = runs.iter().map(|r| r.transactions).sum();
    let seconds: f64 = runs.iter().map(|r| r.seconds).sum();
    let n = runs.len() as f64;
    let mut merged = first.clone();
    merged.transactions = transactions;
    merged.seconds = seconds;
    merged.tps = ratio(transactions as f64, seconds);
    merged.latency_avg_us = runs.iter().map(|r| r.latency_avg_us).sum::<f64>() / n;
    merged.cost.commands_per_op = runs.iter().map(|r| r.cost.commands_per_op).sum::<f64>() / n;
    for (name, us) in &mut merged.cost.command_us {
        *us = runs
            .iter()
            .filter_map(|r| r.cost.command_us.get(name))
            .sum::<f64>()
            / n;
    }
    Some(merged)
}

/// The PostgreSQL targets (P1, P3 and P5).
pub(crate) fn targets(run: Option<&PostgresRun>) -> Vec<Target> {
    let what = |client| match client {
        TABLE => "P1 lease table: cycles/s against pgbench on its bare statements",
        _ => "P1 advisory: cycles/s against a bare pg_try_advisory_lock + pg_advisory_unlock",
    };
    CLIENTS
        .iter()
        .map(|&client| {
            let id = if client == TABLE {
                "P1 table vs bare"
            } else {
                "P1 advisory vs bare"
            };
            match run.and_then(|r| r.against_bare(client)) {
                Some((p1, bare)) => {
                    let share = ratio(p1.per_second, bare.tps);
                    target(
                        id,
                        "14",
                        what(client),
                        "≥ 80 %",
                        format!(
                            "{:.0} % ({:.0} of {:.0}/s)",
                            share * 100.0,
                            p1.per_second,
                            bare.tps
                        ),
                        share >= 0.80,
                    )
                }
                None => not_run(id, "14", what(client), "≥ 80 %"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_take_the_statements_from_lock_postgres() {
        let table = Script::LeaseTable
            .text()
            .expect("the lease table's statements");
        assert!(table.starts_with("\\set r random(1, 1000000000)\nINSERT INTO distlock_leases"));
        assert!(table.contains("WITH released AS ("));
        assert!(table.contains("pg_notify('distlock_released', released.name)"));
        assert!(!table.contains('$'), "{table}");
        assert_eq!(table.matches(";\n").count(), 2);
        assert!(
            Script::Advisory
                .text()
                .expect("the advisory script")
                .contains("pg_advisory_unlock(42)")
        );
    }

    #[test]
    fn parses_pgbench() {
        let text = "transaction type: s.sql\nscaling factor: 1\nquery mode: prepared\n\
            number of clients: 1\nnumber of threads: 1\nmaximum number of tries: 1\n\
            duration: 1 s\nnumber of transactions actually processed: 4321\n\
            number of failed transactions: 0 (0.000%)\nlatency average = 0.231 ms\n\
            initial connection time = 3.1 ms\ntps = 4321.5 (without initial connection time)\n";
        assert_eq!(parse_pgbench(text), Some((4321, 4321.5, 231.0)));
    }
}
