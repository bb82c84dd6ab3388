//! distlock's load tool: measures distlock against the wire, in one run.
//!
//! Starts its own redis-server processes (lock-testkit, free loopback ports, killed by PID at
//! the end), measures the bare-Redis baselines with `redis-benchmark` on the same server, then
//! runs the Redis scenarios against distlock, a hand-written redis-rs lock and (S1–S4, the
//! peer comparison) rslock 0.10:
//!
//! - S1 uncontended: one task, one name, acquire + release in a loop;
//! - S2 parallel: 32 tasks, each its own name;
//! - S3 contended: 8 workers on one name, ~1 ms hold, each client's own way of waiting;
//! - S4 Redlock over 3 and 5 servers, S1's loop, and passes counting own leases still on a
//!   node after release;
//! - S5 10,000 locks held with renewal, in a child process (memory, CPU, round trips);
//! - S6 1,000 waiters on one name (subscriptions, round trips per handoff);
//!
//! and those of the read-write lock and the semaphore:
//!
//! - S7 read-write: 16 tasks on one name, 90 % reads, against the exclusive lock on the same
//!   workload;
//! - S8 semaphore: 32 tasks on 8 permits of one name;
//! - S9 10,000 read leases held with renewal, in a child process, as S5;
//!
//! and that of the fair lock:
//!
//! - S10 fairness across processes: 4 child processes × 4 tasks on one name, ~1 ms hold, with
//!   the plain mutex and with the fair lock; per-process counts, handoff gaps, exclusion.
//!
//! and those on PostgreSQL (one throwaway server, lock-testkit's, with
//! `pg_stat_statements`), in both of lock-postgres's modes, the lease table and advisory locks:
//!
//! - P1: S1 on each mode, interleaved with `pgbench` running the bare statements;
//! - P3: S3 on each mode;
//! - P5: S5 on the lease table;
//!
//! and the lock kinds on the lease table:
//!
//! - P7, P8, P10: S7, S8 and S10 on `PostgresLock`, with S10's counter on Redis;
//!
//! and those on etcd (`EtcdLock`, throwaway members of lock-testkit's):
//!
//! - E1: S1 on one member, interleaved with the bare etcd transactions it sends; E2: the same
//!   with S2's 32 tasks;
//! - E3: S3 on one member; E5: S5 on one member (keep-alive messages, CPU per lease period);
//! - failover: the leader of 3 members killed under a looping task, kill → next grant.
//!
//! Prints tables, writes `run.json` and `chart.svg`. `--help` lists the options; see
//! `benches/README.md` for what each figure means.
#![forbid(unsafe_code)]

mod benchmark;
mod chart;
mod child;
mod cli;
mod clock;
mod counted;
mod curve_chart;
mod curve_plan;
mod curve_report;
mod curve_server;
mod curve_waiters;
mod curves;
mod cycles;
mod etcd;
mod etcd_bare;
mod fairness;
mod handoff;
mod info;
mod interleave;
mod kinds;
mod labels;
mod mysql;
mod objstore;
mod objstore_count;
mod postgres;
mod procfs;
mod progress;
mod renewal;
mod report;
mod rslock;
mod run;
mod serve;
mod server_cost;
mod servers;
mod stale;
mod stats;
mod step;
mod tables;
mod target;
mod waiters;
mod window;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use distlock_bench::HandLock;
use lock_core::Locker;
use lock_core::backend::Lock;
use lock_redis::RedisLock;
use lock_redlock::Redlock;
use lock_testkit::RedisServer;

use crate::benchmark::Baselines;
use crate::cli::{Cli, Part, Plan};
use crate::counted::Counted;
use crate::cycles::Client;
use crate::handoff::Contender;
use crate::info::Probe;
use crate::kinds::Workload;
use crate::progress::Progress;
use crate::renewal::HeldLeases;
use crate::run::{
    BACKEND, DISTLOCK, DISTLOCK_TTL, HAND, HAND_FENCED, RSLOCK, Run, UNFENCED, redlock_label,
    redlock_unfenced_label, rslock_label,
};
use crate::step::{STEP_SLACK, block, slug};

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(role) = cli.child {
        return serve::serve(&cli, role);
    }
    match run_all(&cli) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("loadtool: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The servers of a run: the main one (everything but S4), and four more for S4 (S10 and P10
/// keep their counters on the first of them, one more when S4 does not run).
struct Servers {
    main: RedisServer,
    more: Vec<RedisServer>,
}

impl Servers {
    fn urls(&self, n: usize) -> Vec<String> {
        std::iter::once(&self.main)
            .chain(&self.more)
            .take(n)
            .map(RedisServer::url)
            .collect()
    }
}

fn run_all(cli: &Cli) -> Result<ExitCode, String> {
    let plan = Plan::from_cli(cli)?;
    let started = std::time::Instant::now();
    let runtime = plan.runtime.runtime().map_err(|e| e.to_string())?;
    let bench = benchmark::binary();
    let mut progress = Progress::new(steps(&plan, bench.is_some()));

    progress.next();
    let servers = Servers {
        main: RedisServer::start().map_err(|e| format!("starting redis-server: {e}"))?,
        more: (0..if plan.has(Part::S4) {
            4
        } else {
            usize::from(plan.has(Part::S10) || plan.has(Part::P10))
        })
            .map(|_| RedisServer::start())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("starting redis-server: {e}"))?,
    };
    let url = servers.main.url();
    let mut probe = block(&runtime, Duration::ZERO, Probe::connect(&servers.urls(1)))?
        .map_err(|e| format!("connecting to {url}: {e}"))?;
    let redis_version =
        block(&runtime, Duration::ZERO, probe.version())?.map_err(|e| e.to_string())?;
    // The hand-written lock's release script, for redis-benchmark's EVALSHA.
    let release_sha: String = block(&runtime, Duration::ZERO, async {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(distlock_bench::handwritten::RELEASE_LUA)
            .query_async(
                &mut redis::Client::open(url.as_str())?
                    .get_multiplexed_async_connection()
                    .await?,
            )
            .await
    })?
    .map_err(|e: redis::RedisError| e.to_string())?;

    let mut run = Run {
        tool: "distlock loadtool",
        version: env!("CARGO_PKG_VERSION"),
        started_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        commit: run::commit(),
        wall_s: 0.0,
        machine: procfs::Machine::detect(),
        redis_version,
        plan: plan.clone(),
        baselines: Baselines::default(),
        s1: Vec::new(),
        s2: Vec::new(),
        s3: Vec::new(),
        s4: Vec::new(),
        s4_stale: Vec::new(),
        s5: None,
        s6: None,
        s7: Vec::new(),
        s8: None,
        s9: Vec::new(),
        s10: Vec::new(),
        postgres: None,
        servers: Vec::new(),
        etcd: None,
        mysql: None,
        object_store: None,
        curves: None,
        targets: Vec::new(),
        failures: Vec::new(),
    };
    let mut bench_runs = Vec::new();
    let port = servers.main.port();
    let benchmark = |progress: &mut Progress, spec: &benchmark::Spec| match &bench {
        Some(binary) => {
            progress.next();
            benchmark::run(binary, port, spec, STEP_SLACK)
        }
        None => Err("redis-benchmark not found".to_owned()),
    };

    if plan.has(Part::Baseline) && bench.is_some() {
        let specs = benchmark::other_specs(
            &release_sha,
            plan.bench_requests_single,
            plan.bench_requests_pipelined,
        );
        for spec in &specs {
            bench_runs.push(benchmark(&mut progress, spec)?);
        }
    }

    if plan.has(Part::S1) {
        // Rounds of: the two round trips of the limit, then every client; so a slow patch of
        // the (shared) machine weighs on all of them alike.
        let clients = S1_CLIENTS;
        let made = block(&runtime, Duration::ZERO, async {
            let mut made = Vec::new();
            for label in clients {
                made.push(client(label, &url).await?);
            }
            Ok::<_, String>(made)
        })??;
        let mut windows: Vec<Vec<cycles::Window>> = clients.iter().map(|_| Vec::new()).collect();
        let mut limit_runs: Vec<Vec<benchmark::Bench>> = Vec::new();
        let round_timing = window::Timing {
            warmup: plan.cycles.warmup / plan.s1_rounds,
            measure: plan.cycles.measure / plan.s1_rounds,
        };
        for _ in 0..plan.s1_rounds {
            if bench.is_some() {
                let requests = plan.bench_requests_single / u64::from(plan.s1_rounds);
                let specs = benchmark::round_trip_specs(&release_sha, requests.max(1));
                for (i, spec) in specs.iter().enumerate() {
                    if limit_runs.len() <= i {
                        limit_runs.push(Vec::new());
                    }
                    limit_runs[i].push(benchmark(&mut progress, spec)?);
                }
            }
            for (i, (label, client)) in clients.iter().zip(&made).enumerate() {
                progress.next();
                let name = format!("s1:{}", slug(label));
                windows[i].push(block(
                    &runtime,
                    round_timing.warmup + round_timing.measure,
                    cycles::measure(label, client.clone(), &name, 1, round_timing, &mut probe),
                )??);
            }
        }
        bench_runs.extend(
            limit_runs
                .iter()
                .filter_map(|runs| benchmark::Bench::merge(runs)),
        );
        run.s1 = clients
            .iter()
            .zip(windows)
            .map(|(label, w)| cycles::CycleRun::from_windows("S1", label, 1, w))
            .collect();
    }
    run.baselines = match &bench {
        Some(_) => Baselines::from_runs(bench_runs),
        None => {
            let why =
                "redis-benchmark not found (it comes with Redis: run scripts/ensure-redis.sh)";
            progress.note(&format!(
                "warning: {why}; the redis-benchmark baselines are left out"
            ));
            Baselines {
                unavailable: Some(why.to_owned()),
                ..Baselines::default()
            }
        }
    };

    if plan.has(Part::S2) {
        for label in S2_CLIENTS {
            progress.next();
            let client = block(&runtime, Duration::ZERO, client(label, &url))??;
            let name = format!("s2:{}", slug(label));
            run.s2.push(block(
                &runtime,
                plan.cycles.warmup + plan.cycles.measure,
                cycles::run(
                    "S2",
                    label,
                    client,
                    &name,
                    plan.s2_tasks,
                    plan.cycles,
                    &mut probe,
                ),
            )??);
        }
    }

    if plan.has(Part::Valkey) {
        // S1 and S2 on this run's redis-server, then on a Valkey server of its own.
        let timing = plan.server_round;
        let redis =
            block(&runtime, Duration::ZERO, servers::describe(&url))?.map_err(|e| e.to_string())?;
        run.servers.extend(servers::run(
            &runtime,
            &mut progress,
            &redis,
            &url,
            plan.server_rounds,
            timing,
            plan.s2_tasks,
        )?);
        match RedisServer::builder().valkey().start() {
            Ok(valkey) => {
                let valkey_url = valkey.url();
                let name = block(&runtime, Duration::ZERO, servers::describe(&valkey_url))?
                    .map_err(|e| e.to_string())?;
                run.servers.extend(servers::run(
                    &runtime,
                    &mut progress,
                    &name,
                    &valkey_url,
                    plan.server_rounds,
                    timing,
                    plan.s2_tasks,
                )?);
            }
            Err(error) => {
                progress.next();
                progress.next();
                progress.note(&format!(
                    "warning: no Valkey server ({error}); run scripts/ensure-valkey.sh. The Valkey column is left out"
                ));
            }
        }
    }

    if plan.has(Part::S3) {
        for label in S3_CLIENTS {
            progress.next();
            let contender = block(&runtime, Duration::ZERO, async {
                Ok::<_, String>(match label {
                    HAND => {
                        Contender::Hand(HandLock::connect(&url).await.map_err(|e| e.to_string())?)
                    }
                    RSLOCK => Contender::Rslock(crate::rslock::manager(&servers.urls(1))?),
                    _ => Contender::Locker(Locker::new(redis_lock(&url, label != UNFENCED)?)),
                })
            })??;
            let name = format!("s3:{}", slug(label));
            run.s3.push(block(
                &runtime,
                plan.contention.warmup + plan.contention.measure,
                handoff::run(
                    label,
                    contender,
                    &name,
                    plan.s3_workers,
                    plan.s3_hold,
                    plan.contention,
                    &mut probe,
                ),
            )??);
        }
    }

    if plan.has(Part::S4) {
        for nodes in [3, 5] {
            let urls = servers.urls(nodes);
            let mut all = block(&runtime, Duration::ZERO, Probe::connect(&urls))?
                .map_err(|e| e.to_string())?;
            let node_locks = |fencing: bool| {
                urls.iter()
                    .map(
                        |url| match RedisLock::builder().url(url).fencing(fencing).build() {
                            Ok(node) => Ok(Arc::new(node) as Arc<dyn Lock>),
                            Err(e) => Err(e.to_string()),
                        },
                    )
                    .collect::<Result<Vec<_>, String>>()
            };
            let redlock = |nodes: Vec<Arc<dyn Lock>>| {
                nodes
                    .into_iter()
                    .fold(Redlock::builder(), |builder, node| builder.node_arc(node))
                    .build()
                    .map_err(|e| e.to_string())
            };
            // Interleaved rounds (rslock, then the unfenced Redlock, then the fenced one, in
            // each), so that a slow patch of the shared machine weighs on all three alike.
            let labels = [
                redlock_label(nodes),
                redlock_unfenced_label(nodes),
                rslock_label(nodes),
            ];
            let clients = [
                Client::Locker(Locker::new(redlock(node_locks(true)?)?), None),
                Client::Locker(Locker::new(redlock(node_locks(false)?)?), None),
                Client::Rslock(crate::rslock::manager(&urls)?),
            ];
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            run.s4.extend(interleave::rounds(
                &interleave::Part {
                    scenario: "S4",
                    tasks: 1,
                    labels: &labels,
                    separator: ":",
                },
                &plan,
                &runtime,
                &mut progress,
                &clients,
                &mut all,
            )?);
            // The counting passes: distlock's Redlock over nodes that count their busy
            // answers, then rslock (it does not expose them: the key check only).
            let counters: Vec<Arc<Counted>> = node_locks(true)?
                .into_iter()
                .map(|node| Arc::new(Counted::new(node)))
                .collect();
            let counted = redlock(
                counters
                    .iter()
                    .map(|c| Arc::clone(c) as Arc<dyn Lock>)
                    .collect(),
            )?;
            let passes = [
                (
                    redlock_label(nodes),
                    Client::Locker(Locker::new(counted), None),
                    Some(&counters[..]),
                ),
                (rslock_label(nodes), clients[2].clone(), None),
            ];
            for (label, client, busy) in passes {
                progress.next();
                run.s4_stale.push(block(
                    &runtime,
                    count_time(plan.s4_count_cycles),
                    stale::run(
                        &label,
                        &client,
                        busy,
                        &urls,
                        &format!("s4-count:{}", slug(&label)),
                        plan.s4_count_cycles,
                    ),
                )??);
            }
        }
    }

    let renewal = |progress: &mut Progress, kind| {
        progress.next();
        let params = renewal::Params {
            kind,
            backend: renewal::Backend::Redis,
            locks: plan.s5_locks,
            lease_ms: u64::try_from(plan.s5_lease.as_millis()).unwrap_or(u64::MAX),
            periods: plan.s5_periods,
            server_pid: None,
        };
        renewal::run(&url, plan.runtime.as_arg(), params)
    };
    if plan.has(Part::S5) {
        run.s5 = Some(renewal(&mut progress, HeldLeases::Locks)?);
    }

    if plan.has(Part::S6) {
        progress.next();
        run.s6 = Some(block(
            &runtime,
            Duration::from_secs(60),
            waiters::run(&url, plan.s6_waiters, &mut probe),
        )??);
    }

    let mut sharing = |progress: &mut Progress, workload: Workload, tasks| {
        progress.next();
        let locker = Locker::new(redis_lock(&url, true)?);
        let name = format!("{}:{}", workload.scenario(), slug(workload.label())).to_lowercase();
        block(
            &runtime,
            plan.contention.warmup + plan.contention.measure,
            kinds::run(
                workload,
                locker,
                &name,
                tasks,
                plan.s3_hold,
                plan.contention,
                &mut probe,
            ),
        )?
    };
    if plan.has(Part::S7) {
        for workload in s7_workloads(&plan) {
            run.s7
                .push(sharing(&mut progress, workload, plan.s7_tasks)?);
        }
    }
    if plan.has(Part::S8) {
        let workload = Workload::Semaphore {
            max: plan.s8_permits,
        };
        run.s8 = Some(sharing(&mut progress, workload, plan.s8_tasks)?);
    }

    if plan.has(Part::S9) {
        for kind in S9_HELD {
            run.s9.push(renewal(&mut progress, kind)?);
        }
    }

    if plan.has(Part::S10) {
        let counter_url = servers
            .more
            .first()
            .map(RedisServer::url)
            .ok_or("S10: no server for the counter")?;
        let setup = fairness::Setup {
            scenario: "S10",
            backend: renewal::Backend::Redis,
            url: &url,
            counter_url: &counter_url,
            runtime: plan.runtime.as_arg(),
            processes: plan.s10_processes,
            tasks: plan.s10_tasks,
            hold: plan.s3_hold,
            timing: plan.contention,
        };
        for asked in S10_ASKED {
            progress.next();
            run.s10
                .push(fairness::run(&runtime, &mut probe, setup, asked)?);
        }
    }

    if plan.has_postgres() {
        let counter_url = servers.more.first().map(RedisServer::url);
        run.postgres = Some(postgres::run(
            &plan,
            &runtime,
            &mut progress,
            counter_url.as_deref(),
        )?);
    }

    if plan.has_etcd() {
        run.etcd = Some(etcd::run(&plan, &runtime, &mut progress)?);
    }

    if plan.has_mysql() {
        run.mysql = Some(mysql::run(&plan, &runtime, &mut progress)?);
    }
    if plan.has_object_store() {
        run.object_store = Some(objstore::run(&plan, &runtime, &mut progress)?);
    }

    // The cost curves (`--only c1,c2`): minutes, so never in the default run.
    if plan.has(Part::C1) || plan.has(Part::C2) {
        run.curves = Some(curves::run(&plan, &runtime, &mut progress)?);
    }

    progress.next();
    run.wall_s = started.elapsed().as_secs_f64();
    run.judge();
    run.check();
    std::fs::create_dir_all(&plan.out)
        .map_err(|e| format!("creating {}: {e}", plan.out.display()))?;
    let json = plan.out.join("run.json");
    let text = serde_json::to_string_pretty(&run).map_err(|e| e.to_string())?;
    std::fs::write(&json, text + "\n").map_err(|e| format!("writing {}: {e}", json.display()))?;
    let svg = plan.out.join("chart.svg");
    // A run of the cost curves alone has nothing for the scenarios' chart.
    let curves_only = plan.parts.iter().all(|p| matches!(p, Part::C1 | Part::C2));
    if !curves_only {
        chart::write(&run, &svg)?;
    }
    progress.finish();
    drop(probe);
    drop(runtime);
    drop(servers);

    report::print(&run);
    mysql::report(run.mysql.as_ref());
    objstore::report(run.object_store.as_ref());
    if let Some(curves) = &run.curves {
        curves::report(curves, &run, &plan)?;
    }
    report::print_targets(&run);
    if curves_only {
        println!("\nWrote {}", json.display());
    } else {
        println!("\nWrote {} and {}", json.display(), svg.display());
    }
    let missed = run.targets.iter().any(|t| t.met == Some(false));
    Ok(if !run.failures.is_empty() {
        ExitCode::FAILURE
    } else if cli.strict && missed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// The steps of a run with their planned times, for the progress bar, in the order they run.
/// Who runs S1, S2 and S3, in this order.
const S1_CLIENTS: [&str; 7] = [
    HAND,
    HAND_FENCED,
    RSLOCK,
    BACKEND,
    DISTLOCK_TTL,
    UNFENCED,
    DISTLOCK,
];
const S2_CLIENTS: [&str; 6] = [HAND, HAND_FENCED, RSLOCK, BACKEND, UNFENCED, DISTLOCK];
const S3_CLIENTS: [&str; 4] = [HAND, RSLOCK, UNFENCED, DISTLOCK];
/// What S10's tasks ask for, in this order.
const S10_ASKED: [fairness::Asked; 2] = [fairness::Asked::Plain, fairness::Asked::Fair];
/// What S9's children hold, in this order.
const S9_HELD: [HeldLeases; 2] = [HeldLeases::ReadersOfOneName, HeldLeases::ReadersOfManyNames];

/// S7's workloads, in the order they run: the read-write lock, then the same choices on the
/// exclusive lock.
fn s7_workloads(plan: &Plan) -> [Workload; 2] {
    let writes = plan.s7_writes;
    [
        Workload::ReadWrite { writes },
        Workload::Exclusive { writes },
    ]
}

fn steps(plan: &Plan, bench: bool) -> Vec<(String, Duration)> {
    let secs = Duration::from_secs_f64;
    let cycle = plan.cycles.warmup + plan.cycles.measure + secs(0.1);
    let contention = plan.contention.warmup + plan.contention.measure + secs(0.1);
    let single = secs(1.5 * plan.bench_requests_single as f64 / 20_000.0);
    let piped = secs(1.5 * plan.bench_requests_pipelined as f64 / 300_000.0);
    let mut s = vec![("starting redis-server processes".to_owned(), secs(1.5))];
    if plan.has(Part::Baseline) && bench {
        for spec in benchmark::other_specs("", 1, 1) {
            let t = if spec.pipeline > 1 { piped } else { single };
            s.push((format!("redis-benchmark: {}", spec.name), t));
        }
    }
    if plan.has(Part::S1) {
        let rounds = plan.s1_rounds;
        for round in 1..=rounds {
            if bench {
                for spec in benchmark::round_trip_specs("", 1) {
                    s.push((
                        format!("S1 round {round}/{rounds}: redis-benchmark {}", spec.name),
                        single / rounds,
                    ));
                }
            }
            for client in S1_CLIENTS {
                s.push((
                    format!("S1 round {round}/{rounds}: {client}"),
                    cycle / rounds,
                ));
            }
        }
    }
    if plan.has(Part::S2) {
        for client in S2_CLIENTS {
            s.push((format!("S2 {} tasks: {client}", plan.s2_tasks), cycle));
        }
    }
    if plan.has(Part::Valkey) {
        let round = plan.server_round.warmup + plan.server_round.measure + secs(0.05);
        let scenario =
            round * plan.server_rounds * u32::try_from(servers::CLIENTS.len()).unwrap_or(1);
        for server in ["Redis", "Valkey"] {
            for step in servers::steps(server, plan.server_rounds, plan.s2_tasks) {
                s.push((step, scenario));
            }
        }
    }
    if plan.has(Part::S3) {
        for client in S3_CLIENTS {
            s.push((
                format!("S3 {} workers, one name: {client}", plan.s3_workers),
                contention,
            ));
        }
    }
    if plan.has(Part::S4) {
        for nodes in [3, 5] {
            let rounds = plan.s1_rounds;
            for round in 1..=rounds {
                // In the order each round runs them: the baseline first.
                for label in [
                    rslock_label(nodes),
                    redlock_unfenced_label(nodes),
                    redlock_label(nodes),
                ] {
                    s.push((
                        format!("S4 round {round}/{rounds}: {label}"),
                        cycle / rounds,
                    ));
                }
            }
            for label in [redlock_label(nodes), rslock_label(nodes)] {
                s.push((
                    format!("S4 {label}: counting own leases left after release"),
                    count_time(plan.s4_count_cycles),
                ));
            }
        }
    }
    let renewal = plan.s5_lease * plan.s5_periods + secs(3.0);
    if plan.has(Part::S5) {
        s.push((
            format!("S5 {} renewed locks (child process)", plan.s5_locks),
            renewal,
        ));
    }
    if plan.has(Part::S6) {
        s.push((
            format!("S6 {} waiters on one name", plan.s6_waiters),
            secs(2.0),
        ));
    }
    if plan.has(Part::S7) {
        for workload in s7_workloads(plan) {
            s.push((
                format!("S7 {} tasks, one name: {}", plan.s7_tasks, workload.label()),
                contention,
            ));
        }
    }
    if plan.has(Part::S8) {
        s.push((
            format!(
                "S8 {} tasks, {} permits of one name",
                plan.s8_tasks, plan.s8_permits
            ),
            contention,
        ));
    }
    if plan.has(Part::S9) {
        for kind in S9_HELD {
            s.push((
                format!(
                    "S9 {} renewed {} (child process)",
                    plan.s5_locks,
                    kind.describe()
                ),
                renewal,
            ));
        }
    }
    if plan.has(Part::S10) {
        for asked in S10_ASKED {
            s.push((
                format!(
                    "S10 {} processes × {} tasks, one name: {}",
                    plan.s10_processes,
                    plan.s10_tasks,
                    asked.label()
                ),
                contention + secs(0.5),
            ));
        }
    }
    if plan.has_postgres() {
        s.push(("starting PostgreSQL".to_owned(), secs(2.0)));
    }
    if plan.has(Part::P1) {
        let rounds = plan.s1_rounds;
        let bench = (plan.cycles.measure / rounds).as_secs_f64().ceil().max(1.0);
        for round in 1..=rounds {
            for script in postgres::Script::ALL {
                s.push((
                    format!("P1 round {round}/{rounds}: pgbench {}", script.name()),
                    secs(bench + 0.1),
                ));
            }
            for client in postgres::P1_CLIENTS {
                s.push((
                    format!("P1 round {round}/{rounds}: {client}"),
                    cycle / rounds,
                ));
            }
        }
    }
    if plan.has(Part::P3) {
        for client in postgres::CLIENTS {
            s.push((
                format!("P3 {} workers, one name: {client}", plan.s3_workers),
                contention,
            ));
        }
    }
    if plan.has(Part::P5) {
        s.push((
            format!(
                "P5 {} renewed locks, lease table (child process)",
                plan.s5_locks
            ),
            renewal,
        ));
    }
    if plan.has(Part::P7) {
        for workload in s7_workloads(plan) {
            s.push((
                format!("P7 {} tasks, one name: {}", plan.s7_tasks, workload.label()),
                contention,
            ));
        }
    }
    if plan.has(Part::P8) {
        s.push((
            format!(
                "P8 {} tasks, {} permits of one name",
                plan.s8_tasks, plan.s8_permits
            ),
            contention,
        ));
    }
    if plan.has(Part::P10) {
        for asked in S10_ASKED {
            s.push((
                format!(
                    "P10 {} processes × {} tasks, one name: {}",
                    plan.s10_processes,
                    plan.s10_tasks,
                    asked.label()
                ),
                contention + secs(0.5),
            ));
        }
    }
    if plan.has(Part::E1) || plan.has(Part::E2) || plan.has(Part::E3) || plan.has(Part::E5) {
        s.push(("starting etcd".to_owned(), secs(2.0)));
    }
    if plan.has_mysql() {
        s.push(("starting MariaDB".to_owned(), secs(3.0)));
    }
    for (part, name) in [(Part::M1, "M1"), (Part::M2, "M2")] {
        if plan.has(part) {
            let rounds = plan.s1_rounds;
            for round in 1..=rounds {
                for client in mysql::CLIENTS {
                    s.push((
                        format!("{name} round {round}/{rounds}: {client}"),
                        cycle / rounds,
                    ));
                }
            }
        }
    }
    if plan.has_object_store() {
        s.push(("starting SeaweedFS".to_owned(), secs(3.0)));
    }
    for (part, name) in [(Part::O1, "O1"), (Part::O2, "O2")] {
        if plan.has(part) {
            let rounds = plan.s1_rounds;
            for round in 1..=rounds {
                for client in objstore::CLIENTS {
                    s.push((
                        format!("{name} round {round}/{rounds}: {client}"),
                        cycle / rounds,
                    ));
                }
            }
        }
    }
    if plan.has(Part::OTakeover) {
        let rounds = u32::try_from(plan.takeovers()).unwrap_or(1);
        s.push((
            format!("object-storage takeover: {rounds} holders die"),
            objstore::TAKEOVER_LEASE * rounds,
        ));
    }
    if plan.has(Part::O5) {
        s.push((
            format!("O5 {} renewed locks on object storage", objstore::O5_LOCKS),
            plan.s5_lease * plan.s5_periods,
        ));
    }
    for (part, name) in [(Part::E1, "E1"), (Part::E2, "E2")] {
        if plan.has(part) {
            let rounds = plan.s1_rounds;
            for round in 1..=rounds {
                for client in etcd::ROUND_ORDER {
                    s.push((
                        format!("{name} round {round}/{rounds}: {client}"),
                        cycle / rounds,
                    ));
                }
            }
        }
    }
    if plan.has(Part::E3) {
        s.push((
            format!(
                "E3 {} workers, one name: {}",
                plan.s3_workers,
                etcd::DISTLOCK
            ),
            contention,
        ));
    }
    if plan.has(Part::E5) {
        s.push((
            format!("E5 {} renewed locks on etcd (child process)", plan.s5_locks),
            renewal,
        ));
    }
    if plan.has(Part::EFailover) {
        s.push((
            format!(
                "etcd failover: the leader of 3 killed {} times",
                plan.failovers()
            ),
            secs(5.0 * plan.failovers() as f64),
        ));
    }
    s.extend(curves::steps(plan));
    s.push(("writing the report".into(), secs(0.5)));
    s
}

async fn client(label: &str, url: &str) -> Result<Client, String> {
    Ok(match label {
        HAND => Client::Hand(HandLock::connect(url).await.map_err(|e| e.to_string())?),
        HAND_FENCED => Client::HandFenced(
            distlock_bench::HandFencedLock::connect(url)
                .await
                .map_err(|e| e.to_string())?,
        ),
        RSLOCK => Client::Rslock(crate::rslock::manager(&[url.to_owned()])?),
        BACKEND => Client::Backend(Arc::new(redis_lock(url, true)?) as Arc<dyn Lock>),
        DISTLOCK_TTL => Client::Locker(Locker::new(redis_lock(url, true)?), Some(cycles::TTL)),
        UNFENCED => Client::Locker(Locker::new(redis_lock(url, false)?), None),
        _ => Client::Locker(Locker::new(redis_lock(url, true)?), None),
    })
}

/// The planned time of one of S4's counting passes: both passes of `cycles` cycles at ~2,000
/// Redlock cycles/s (the key pass adds a round trip to each).
fn count_time(cycles: u64) -> Duration {
    Duration::from_secs_f64(cycles as f64 / 2_000.0 * 2.5)
}

/// A `RedisLock` with the defaults, with or without fencing tokens.
///
/// For measuring loss tracking's cost, two environment variables change it:
/// `DISTLOCK_TRACK_LOSSES` = `off`, or a number of milliseconds a lease is held before its key
/// is tracked (`0`: every lease, a read per grant); `DISTLOCK_BENCH_BCAST=1` adds, per lock,
/// a RESP3 connection in `CLIENT TRACKING ON BCAST` mode that drains the invalidations the
/// server sends it (the cost of the broadcast design, one tracking client).
fn redis_lock(url: &str, fencing: bool) -> Result<RedisLock, String> {
    let mut builder = RedisLock::builder().url(url).fencing(fencing);
    match std::env::var("DISTLOCK_TRACK_LOSSES").ok().as_deref() {
        Some("off") => builder = builder.track_losses(false),
        Some(ms) => {
            let ms = ms
                .parse()
                .map_err(|_| format!("DISTLOCK_TRACK_LOSSES={ms}"))?;
            builder = builder.track_losses_after(Duration::from_millis(ms));
        }
        None => {}
    }
    // One observer per server for the whole run, however many locks the run builds.
    static OBSERVED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    if std::env::var_os("DISTLOCK_BENCH_BCAST").is_some() {
        let mut observed = OBSERVED.lock().unwrap_or_else(|e| e.into_inner());
        if !observed.iter().any(|seen| seen == url) {
            observed.push(url.to_owned());
            std::thread::spawn({
                let url = url.to_owned();
                move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build();
                    if let Ok(runtime) = runtime {
                        let _ = runtime.block_on(bcast_observer(url));
                    }
                }
            });
        }
    }
    builder.build().map_err(|e| e.to_string())
}

/// A client in `CLIENT TRACKING ON BCAST` mode on every key, draining its invalidations until
/// the process ends (see [`redis_lock`]).
async fn bcast_observer(url: String) -> redis::RedisResult<()> {
    let url = format!("{url}?protocol=resp3");
    let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
    let config = redis::AsyncConnectionConfig::new().set_push_sender(tx);
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    redis::cmd("CLIENT")
        .arg("TRACKING")
        .arg("ON")
        .arg("BCAST")
        .query_async::<()>(&mut conn)
        .await?;
    while pushes.recv().await.is_some() {}
    Ok(())
}
