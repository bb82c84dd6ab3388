//! The tables printed at the end of a run.

use comfy_table::Table;

use crate::cycles::CycleRun;
use crate::fairness::FairnessRun;
use crate::handoff::HandoffRun;
use crate::info::Cost;
use crate::kinds::{SharingRun, Workload};
use crate::renewal::{Backend, RenewalRun};
use crate::run::{Run, redlock_label, redlock_unfenced_label, rslock_label};
use crate::stats::{Latency, ratio};
use crate::tables::{breakdown, cycle_table, table};

/// Prints the tables of `run` on stdout, but the stores' own and the targets.
pub(crate) fn print(run: &Run) {
    println!();
    println!(
        "distlock load tool · {} run · {} runtime · redis {} · {} × {} · {:.0} s",
        run.plan.mode,
        run.plan.runtime.as_arg(),
        run.redis_version,
        run.machine.cpus,
        run.machine.cpu_model,
        run.wall_s
    );
    baselines(run);
    cycles(run);
    servers(run);
    contention(run);
    kinds(run);
    fairness(run);
    scale(run);
    postgres(run);
    etcd(run);
}

/// Prints the targets of `run` and its failures, after every table (the stores' own, which
/// `mysql::report` and `objstore::report` print, come between).
pub(crate) fn print_targets(run: &Run) {
    targets(run);
    if !run.failures.is_empty() {
        println!("\nFAILURES (the figures above are not a valid measurement):");
        for f in &run.failures {
            println!("  - {f}");
        }
    }
}

fn baselines(run: &Run) {
    let b = &run.baselines;
    if let Some(why) = &b.unavailable {
        println!("\nBaselines: not measured ({why})");
        return;
    }
    if b.runs.is_empty() {
        return;
    }
    println!(
        "\nBaselines: redis-benchmark on the same server (one client connection unless noted)"
    );
    let mut t = table(&["run", "command", "req/s", "p50 µs", "p99 µs"]);
    for r in &b.runs {
        t.add_row(vec![
            r.name.clone(),
            shorten(&r.command, 48),
            format!("{:.0}", r.rps),
            format!("{:.0}", r.p50_us),
            format!("{:.0}", r.p99_us),
        ]);
    }
    if let (Some(limit), Some(p50)) = (b.round_trip_limit_per_s, b.round_trip_limit_p50_us) {
        t.add_row(vec![
            "round-trip limit of a lock cycle".to_owned(),
            "SET NX PX + EVALSHA, one after the other".to_owned(),
            format!("{limit:.0} cycles/s"),
            format!("{p50:.0}"),
            String::new(),
        ]);
    }
    if let Some(ceiling) = b.pipelined_ceiling_per_s {
        t.add_row(vec![
            "pipelined ceiling (S2's shape)".to_owned(),
            format!(
                "SET NX PX + EVALSHA, {} in flight",
                crate::benchmark::PIPELINE
            ),
            format!("{ceiling:.0} cycles/s"),
            String::new(),
            String::new(),
        ]);
    }
    if let Some(ceiling) = b.server_ceiling_per_s {
        t.add_row(vec![
            "server ceiling".to_owned(),
            format!(
                "the same on {} connections",
                crate::benchmark::SERVER_CONNECTIONS
            ),
            format!("{ceiling:.0} cycles/s"),
            String::new(),
            String::new(),
        ]);
    }
    println!("{t}");
}

fn cycles(run: &Run) {
    let rows: Vec<&CycleRun> = run.s1.iter().chain(&run.s2).chain(&run.s4).collect();
    if rows.is_empty() {
        return;
    }
    println!(
        "\nS1 uncontended (1 task) · S2 parallel (32 tasks, own names) · S4 Redlock (1 task): acquire + release cycles"
    );
    println!("{}", cycle_table(&rows, "in scripts µs/cycle", script_us));
    println!(
        "  in scripts: server time executing EVALSHA (the commands a script calls included), \
         from INFO commandstats"
    );
    for nodes in [3, 5] {
        let Some(theirs) = Run::cycle(&run.s4, &rslock_label(nodes)) else {
            continue;
        };
        for (what, label) in [
            ("Redlock", redlock_label(nodes)),
            ("Redlock with fencing(false)", redlock_unfenced_label(nodes)),
        ] {
            let Some(ours) = Run::cycle(&run.s4, &label) else {
                continue;
            };
            println!(
                "  S4 {nodes} nodes, distlock's {what} against rslock: {:.0} vs {:.0} cycles/s ({:.2}×), p50 {:.0} vs {:.0} µs",
                ours.per_second,
                theirs.per_second,
                ratio(ours.per_second, theirs.per_second),
                ours.latency.p50_us,
                theirs.latency.p50_us
            );
        }
    }
    stale(run);
}

/// S1 and S2 on each server (Redis and Valkey): ratios of medians over alternating rounds.
fn servers(run: &Run) {
    if run.servers.is_empty() {
        return;
    }
    println!(
        "\nS1 and S2 on each server, {} alternating rounds per client: ratio of medians against the hand-written lock of the same kind on the same server (fenced: the hand-written fenced lock; spread: lowest–highest per-round ratio)",
        run.plan.server_rounds
    );
    let mut t = table(&[
        "server",
        "scenario",
        "hand-written cycles/s",
        "hand-written fenced",
        "fencing(false)",
        "fenced (vs hand-written fenced)",
    ]);
    let cell = |c: Option<&crate::servers::ClientRounds>| {
        c.map_or_else(
            || "-".to_owned(),
            |c| {
                format!(
                    "{:.2}× ({:.2}–{:.2}), {:.0}/s; CPU µs/cycle client {:.1}, server {:.1}; {:.2} cmds",
                    c.ratio,
                    c.ratio_spread.0,
                    c.ratio_spread.1,
                    c.median_per_second,
                    c.client_cpu_us,
                    c.server_cpu_us,
                    c.commands_per_cycle
                )
            },
        )
    };
    for r in &run.servers {
        t.add_row(vec![
            r.server.clone(),
            format!("{} ({} tasks)", r.scenario, r.tasks),
            r.client(crate::run::HAND).map_or_else(
                || "-".to_owned(),
                |c| {
                    format!(
                        "{:.0}; CPU µs/cycle client {:.1}, server {:.1}; {:.2} cmds",
                        c.median_per_second, c.client_cpu_us, c.server_cpu_us, c.commands_per_cycle
                    )
                },
            ),
            cell(r.client(crate::run::HAND_FENCED)),
            cell(r.client(crate::run::UNFENCED)),
            cell(r.client(crate::run::DISTLOCK)),
        ]);
    }
    println!("{t}");
}

/// S4's counting passes: own leases still on a node.
fn stale(run: &Run) {
    if run.s4_stale.is_empty() {
        return;
    }
    println!(
        "\nS4 own leases still on a node, back-to-back cycles of one client (separate counting passes, per {:.0} cycles)",
        crate::stale::PER_CYCLES
    );
    let mut t = table(&[
        "client",
        "nodes",
        "busy answers / 20k",
        "busy answers (cycles)",
        "releases leaving a key / 20k",
        "releases leaving a key (cycles)",
        "keys left",
    ]);
    for r in &run.s4_stale {
        t.add_row(vec![
            r.client.clone(),
            r.nodes.to_string(),
            r.busy_answers_per_20k
                .map_or_else(|| "not exposed".to_owned(), |x| format!("{x:.0}")),
            r.busy_answers
                .map_or_else(|| "-".to_owned(), |n| format!("{n} ({})", r.busy_cycles)),
            format!("{:.0}", r.stale_releases_per_20k),
            format!("{} ({})", r.stale_releases, r.key_cycles),
            r.stale_keys.to_string(),
        ]);
    }
    println!("{t}");
    println!(
        "  busy answers: nodes refusing a fresh acquisition (counted by a wrapper around each node); \
         releases leaving a key: EXISTS on every node right after release returned"
    );
}

/// Server µs spent in every command (every statement: planning and executing) per operation.
fn executing_us(cost: &Cost) -> f64 {
    cost.command_us.values().sum()
}

/// Server µs spent executing scripts per operation.
fn script_us(cost: &Cost) -> f64 {
    ["evalsha", "eval", "evalsha_ro", "eval_ro", "fcall"]
        .iter()
        .filter_map(|c| cost.command_us.get(*c))
        .sum()
}

fn contention(run: &Run) {
    if run.s3.is_empty() {
        return;
    }
    println!(
        "\nS3 contended: {} workers, one name, {:.0} ms hold, each client's own way of waiting",
        run.plan.s3_workers,
        run.plan.s3_hold.as_secs_f64() * 1e3
    );
    println!("{}", handoff_table(&run.s3));
}

/// The table of S3 and P3: a row a client.
fn handoff_table(rows: &[HandoffRun]) -> Table {
    let mut t = table(&[
        "client",
        "acq/s",
        "gap from release call µs mean / p50 / p99",
        "gap from release reply µs mean / p50 / p99",
        "self-handoff",
        "cmds/acq",
        "lost updates",
        "hold mean ms",
        "commands per acquisition",
    ]);
    for r in rows {
        t.add_row(vec![
            r.client.clone(),
            format!("{:.0}", r.per_second),
            gap(&r.gap_from_call),
            gap(&r.gap),
            format!("{:.1} %", r.self_handoff * 100.0),
            format!("{:.2}", r.cost.commands_per_op),
            format!("{} / {}", r.lost_updates, r.total_acquisitions),
            format!("{:.2}", r.hold.mean_us / 1e3),
            breakdown(&r.cost),
        ]);
    }
    t
}

/// `203 / 180 / 454`: mean, p50 and p99 in µs.
fn gap(l: &Latency) -> String {
    format!("{:.0} / {:.0} / {:.0}", l.mean_us, l.p50_us, l.p99_us)
}

/// S7 and S8, with P7 and P8 (the same on PostgreSQL's lease table) below them.
fn kinds(run: &Run) {
    let pg = run.postgres.as_ref();
    let rows: Vec<&SharingRun> = run
        .s7
        .iter()
        .chain(&run.s8)
        .chain(pg.into_iter().flat_map(|p| p.p7.iter().chain(&p.p8)))
        .collect();
    if rows.is_empty() {
        return;
    }
    println!(
        "\nS7 read-write ({} tasks, {:.0} % writes) · S8 semaphore ({} tasks, {} permits): one name, {:.0} ms hold; P7, P8: the same on PostgreSQL's lease table",
        run.plan.s7_tasks,
        run.plan.s7_writes * 100.0,
        run.plan.s8_tasks,
        run.plan.s8_permits,
        run.plan.s3_hold.as_secs_f64() * 1e3
    );
    let mut t = table(&[
        "scenario",
        "client",
        "acq/s",
        "writes",
        "wait p50 µs",
        "wait p99 µs",
        "write wait p50 µs",
        "cmds/acq",
        "max shared",
        "violations",
        "lost updates",
        "commands per acquisition",
    ]);
    for r in rows {
        let writes = !matches!(r.workload, Workload::Semaphore { .. });
        let or_dash = |yes: bool, text: String| if yes { text } else { "-".to_owned() };
        t.add_row(vec![
            r.scenario.to_owned(),
            r.client.to_owned(),
            format!("{:.0}", r.per_second),
            or_dash(
                writes,
                format!(
                    "{:.1} %",
                    ratio(r.writes as f64, r.acquisitions as f64) * 100.0
                ),
            ),
            format!("{:.0}", r.wait.p50_us),
            format!("{:.0}", r.wait.p99_us),
            or_dash(writes, format!("{:.0}", r.write_wait.p50_us)),
            format!("{:.2}", r.cost.commands_per_op),
            or_dash(
                !matches!(r.workload, Workload::Exclusive { .. }),
                r.max_shared.to_string(),
            ),
            r.violations.to_string(),
            or_dash(writes, format!("{} / {}", r.lost_updates, r.total_writes)),
            breakdown(&r.cost),
        ]);
    }
    println!("{t}");
    if let Some(x) = run.s7_ratio() {
        println!("  S7: the read-write lock does {x:.2}× the exclusive lock's acquisitions/s");
    }
    if let Some(x) = pg.and_then(crate::postgres::PostgresRun::p7_ratio) {
        println!("  P7: the read-write lock does {x:.2}× the exclusive lock's acquisitions/s");
    }
    println!(
        "  max shared: the most readers (S7) or permit holders (S8) inside at once; \
         wait: from asking to the grant; cmds: Redis commands (INFO commandstats) or PostgreSQL \
         statements (pg_stat_statements)"
    );
}

/// S10, with P10 (the same on PostgreSQL's lease table) below it.
fn fairness(run: &Run) {
    let rows: Vec<&FairnessRun> = run
        .s10
        .iter()
        .chain(run.postgres.iter().flat_map(|p| &p.p10))
        .collect();
    if rows.is_empty() {
        return;
    }
    println!(
        "\nS10 fairness across processes: {} processes × {} tasks, one name, {:.0} ms hold; P10: the same on PostgreSQL's lease table",
        run.plan.s10_processes,
        run.plan.s10_tasks,
        run.plan.s3_hold.as_secs_f64() * 1e3
    );
    let mut t = table(&[
        "scenario",
        "lock",
        "acq/s",
        "acquisitions per process",
        "max/min",
        "per task max/min",
        "gap mean µs",
        "gap p99 µs",
        "same process",
        "longest run",
        "cmds/acq",
        "lost updates",
        "violations",
        "hold mean ms",
        "commands per acquisition",
    ]);
    let spread = |x: Option<f64>| x.map_or_else(|| "∞".to_owned(), |x| format!("{x:.2}"));
    for r in rows {
        t.add_row(vec![
            r.scenario.to_owned(),
            r.client.to_owned(),
            format!("{:.0}", r.per_second),
            crate::run::counts(&r.per_process),
            spread(r.process_max_min),
            spread(r.task_max_min),
            format!("{:.0}", r.gap.mean_us),
            format!("{:.0}", r.gap.p99_us),
            format!("{:.1} %", r.same_process_handoff * 100.0),
            r.longest_process_run.to_string(),
            format!("{:.2}", r.cost.commands_per_op),
            format!("{} / {}", r.lost_updates, r.total_acquisitions),
            r.exclusion_violations.to_string(),
            format!("{:.2}", r.hold.mean_us / 1e3),
            breakdown(&r.cost),
        ]);
    }
    println!("{t}");
    println!(
        "  each process its own Locker and connections; grants ordered by fencing token, gaps \
         timed on CLOCK_MONOTONIC (one clock for all processes); same process: handoffs won by \
         the process that released; longest run: most grants in a row to one process"
    );
}

fn scale(run: &Run) {
    if run.s5.is_none() && run.s6.is_none() && run.s9.is_empty() {
        return;
    }
    println!("\nS5 renewal at scale · S6 many waiters · S9 read leases at scale");
    let mut t = table(&["scenario", "figure", "value"]);
    for r in run.s5.iter().chain(&run.s9) {
        renewal_rows(&mut t, r);
    }
    if let Some(r) = &run.s6 {
        let rows = [
            (
                "waiters that got the lock",
                format!(
                    "{} of {} in {:.2} s ({:.0} handoffs/s)",
                    r.acquired, r.waiters, r.seconds, r.handoffs_per_second
                ),
            ),
            (
                "subscriptions",
                format!(
                    "{} subscriber(s) of the channel, {} pub/sub connection(s), {} SUBSCRIBE",
                    r.max_channel_subscribers, r.max_pubsub_connections, r.subscribe_commands
                ),
            ),
            (
                "round trips per handoff",
                format!(
                    "{:.2} (EVALSHA + SUBSCRIBE); {:.2} commands: {}",
                    r.round_trips_per_handoff,
                    r.cost.commands_per_op,
                    breakdown(&r.cost)
                ),
            ),
            (
                "lost updates / violations",
                format!("{} / {}", r.lost_updates, r.exclusion_violations),
            ),
        ];
        for (figure, value) in rows {
            t.add_row(vec!["S6".to_owned(), figure.to_owned(), value]);
        }
    }
    println!("{t}");
}

/// The rows of one S5, S9 or P5 run.
fn renewal_rows(t: &mut Table, r: &RenewalRun) {
    let round_trips = match r.backend {
        Backend::Redis => format!(
            "{} ({:.1} per period, {:.0} renewals each); server EVALSHA: {}",
            r.renewal_round_trips,
            r.round_trips_per_period,
            r.renewals_per_round_trip,
            r.server_evalsha
        ),
        Backend::Etcd => format!(
            "{} gRPC messages on the server ({:.0} per period, {} of them lease keep-alives), \
             from {} extend_many batches of {:.0}",
            r.server_statements,
            r.server_statements as f64 / f64::from(r.periods.max(1)),
            r.server_keepalives,
            r.renewal_round_trips,
            r.renewals_per_round_trip
        ),
        Backend::PostgresTable => format!(
            "{} statements on the server ({:.0} per period; each its own round trip on one of \
             the pool's connections), from {} extend_many batches of {:.0}",
            r.server_statements,
            r.server_statements as f64 / f64::from(r.periods.max(1)),
            r.renewal_round_trips,
            r.renewals_per_round_trip
        ),
        Backend::Mysql => format!(
            "{} extend_many batches of {:.0} (the server is not probed for statements)",
            r.renewal_round_trips, r.renewals_per_round_trip
        ),
    };
    let rows = [
        (
            "leases held, renewed",
            format!(
                "{} {} for {:.1} s ({} periods of a {:.1} s lease)",
                r.locks,
                r.kind.describe(),
                r.hold_s,
                r.periods,
                r.lease_s
            ),
        ),
        ("taking them", format!("{:.2} s", r.acquire_s)),
        (
            "RSS before → holding",
            format!(
                "{:.1} → {:.1} MiB (anon {:.1} MiB, peak {:.1} MiB)",
                r.memory_before.rss, r.memory_held.rss, r.memory_held.anon, r.memory_held.peak
            ),
        ),
        (
            "CPU while holding",
            format!(
                "{:.2} % of a core at a {:.1} s lease → {:.2} % at 30 s",
                r.cpu_share * 100.0,
                r.lease_s,
                r.cpu_share_at_30s_lease * 100.0
            ),
        ),
        ("renewal round trips", round_trips),
        ("leases lost", r.lost.to_string()),
    ];
    for (figure, value) in rows {
        t.add_row(vec![r.scenario().to_owned(), figure.to_owned(), value]);
    }
}

/// P1, P3 and P5: PostgreSQL, with pgbench on the bare statements as P1's limit.
fn postgres(run: &Run) {
    let Some(pg) = &run.postgres else {
        return;
    };
    if !pg.pgbench.is_empty() {
        println!(
            "\nP1 baselines: pgbench on the same PostgreSQL {} server, 1 connection, prepared \
             statements",
            pg.version
        );
        let mut t = table(&[
            "script",
            "command",
            "cycles/s",
            "latency avg µs",
            "statements/cycle",
            "planning + executing µs/cycle",
        ]);
        for b in &pg.pgbench {
            t.add_row(vec![
                b.script.to_owned(),
                b.command.clone(),
                format!("{:.0}", b.tps),
                format!("{:.0}", b.latency_avg_us),
                format!("{:.2}", b.cost.commands_per_op),
                format!("{:.1}", executing_us(&b.cost)),
            ]);
        }
        println!("{t}");
    }
    if !pg.p1.is_empty() {
        println!("\nP1 uncontended on PostgreSQL (1 task): acquire + release cycles");
        let rows: Vec<&CycleRun> = pg.p1.iter().collect();
        println!(
            "{}",
            cycle_table(&rows, "planning + executing µs/cycle", executing_us)
        );
        for client in crate::postgres::P1_CLIENTS {
            if let Some((p1, bare)) = pg.against_bare(client) {
                println!(
                    "  {client}: {:.0} % of its bare statements ({:.0} of {:.0} cycles/s)",
                    ratio(p1.per_second, bare.tps) * 100.0,
                    p1.per_second,
                    bare.tps
                );
            }
        }
        println!(
            "  cmds: statements from pg_stat_statements (calls; planning + executing: \
             total_plan_time + total_exec_time); server CPU: the postmaster and its backends, /proc"
        );
    }
    if !pg.p3.is_empty() {
        println!(
            "\nP3 contended on PostgreSQL: {} workers, one name, {:.0} ms hold, distlock's defaults",
            run.plan.s3_workers,
            run.plan.s3_hold.as_secs_f64() * 1e3
        );
        println!("{}", handoff_table(&pg.p3));
    }
    if let Some(r) = &pg.p5 {
        println!("\nP5 renewal at scale on PostgreSQL's lease table");
        let mut t = table(&["scenario", "figure", "value"]);
        renewal_rows(&mut t, r);
        println!("{t}");
    }
}

/// E1's or E2's table: distlock and the bare transactions, in one run.
fn etcd_cycles(runs: &[CycleRun], title: &str) {
    if runs.is_empty() {
        return;
    }
    println!("\n{title}: acquire + release cycles");
    let rows: Vec<&CycleRun> = runs.iter().collect();
    println!(
        "{}",
        cycle_table(&rows, "gRPC messages/cycle", |c| c.commands_per_op)
    );
    let find = |client: &str| runs.iter().find(|r| r.client == client);
    if let (Some(d), Some(b)) = (find(crate::etcd::DISTLOCK), find(crate::etcd::BARE)) {
        println!(
            "  distlock: {:.0} % of its bare transactions ({:.0} of {:.0} cycles/s)",
            ratio(d.per_second, b.per_second) * 100.0,
            d.per_second,
            b.per_second
        );
    }
    println!(
        "  cmds: gRPC messages the member received (grpc_server_msg_received_total); server \
         CPU: the etcd process, /proc"
    );
}

/// E1, E2, E3, E5 and the failover: etcd.
fn etcd(run: &Run) {
    let Some(etcd) = &run.etcd else {
        return;
    };
    let version = etcd.version;
    etcd_cycles(
        &etcd.e1,
        &format!("E1 uncontended on etcd {version} (one member, 1 task)"),
    );
    let tasks = run.plan.s2_tasks;
    etcd_cycles(
        &etcd.e2,
        &format!("E2 parallel on etcd {version} (one member, {tasks} tasks, each its own name)"),
    );
    if let Some(e3) = &etcd.e3 {
        println!(
            "\nE3 contended on etcd: {} workers, one name, {:.0} ms hold, distlock's defaults",
            run.plan.s3_workers,
            run.plan.s3_hold.as_secs_f64() * 1e3
        );
        println!("{}", handoff_table(std::slice::from_ref(e3)));
    }
    if let Some(r) = &etcd.e5 {
        println!("\nE5 renewal at scale on etcd (one member)");
        let mut t = table(&["scenario", "figure", "value"]);
        renewal_rows(&mut t, r);
        let period = r.periods.max(1) as f64;
        for (figure, value) in [
            (
                "keep-alive messages per lease period",
                format!("{:.0}", r.server_keepalives as f64 / period),
            ),
            (
                "etcd CPU, share of one core",
                format!("{:.1} %", r.server_cpu_share * 100.0),
            ),
        ] {
            t.add_row(vec!["E5".to_owned(), figure.to_owned(), value]);
        }
        println!("{t}");
    }
    if let Some(f) = &etcd.failover {
        println!(
            "\netcd failover: the leader of {} members killed {} times under a task taking and \
             releasing one lock (command timeout {} ms, lease {} ms)",
            f.members, f.kills, f.command_timeout_ms, f.ttl_ms
        );
        let mut t = table(&["figure", "p50 ms", "p99 ms", "max ms"]);
        for (figure, l) in [
            ("kill → next grant", &f.kill_to_grant),
            ("kill → new leader agreed", &f.kill_to_leader),
        ] {
            t.add_row(vec![
                figure.to_owned(),
                format!("{:.0}", l.p50_us / 1e3),
                format!("{:.0}", l.p99_us / 1e3),
                format!("{:.0}", l.max_us / 1e3),
            ]);
        }
        println!("{t}");
        println!(
            "  {} cycles, {} failed rounds (first: {})",
            f.cycles,
            f.errors,
            f.first_error.as_deref().unwrap_or("-")
        );
    }
}

fn targets(run: &Run) {
    if run.targets.is_empty() {
        return;
    }
    println!("\nTargets");
    let mut t = table(&["target", "issues", "goal", "measured", "met"]);
    for target in &run.targets {
        t.add_row(vec![
            format!("{} — {}", target.id, target.what),
            target.issues.to_owned(),
            target.goal.to_owned(),
            target.measured.clone(),
            match target.met {
                Some(true) => "yes".to_owned(),
                Some(false) => "NO".to_owned(),
                None => "-".to_owned(),
            },
        ]);
    }
    println!("{t}");
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_shortened_with_an_ellipsis() {
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(shorten("abc", 4), "abc");
    }
}
