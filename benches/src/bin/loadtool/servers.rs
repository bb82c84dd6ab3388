//! The comparison across servers (Redis and Valkey): S1 (one task) and S2 (32 tasks, own names) on the
//! run's redis-server and on a Valkey server, for the hand-written lock and distlock fenced and
//! `fencing(false)`, each ratio against the hand-written lock of its own kind on the same server:
//! distlock fenced against the hand-written fenced lock, the others against the plain one.
//!
//! One long window per client let the shared machine's slow patches decide ratios (S1 moved
//! between 0.61 and 1.25 from run to run in the first harness), so here every client runs in
//! short rounds, the clients alternating within each round (A, B, C; then B, C, A; …), and a
//! ratio is the median of the client's rounds over the median of the hand-written lock's,
//! with the spread of the per-round ratios beside it.

use std::time::Duration;

use serde::Serialize;
use tokio::runtime::Runtime;

use crate::cycles::{self, Client};
use crate::info::Probe;
use crate::labels::{DISTLOCK, HAND, HAND_FENCED, UNFENCED};
use crate::progress::Progress;
use crate::step::{block, slug};
use crate::window::Timing;

/// The clients compared on each server, the hand-written locks first (the ratios' bases).
pub(crate) const CLIENTS: [&str; 4] = [HAND, HAND_FENCED, UNFENCED, DISTLOCK];

/// The index in [`CLIENTS`] of the hand-written lock client `label` is compared with: the
/// fenced one for distlock fenced (issue 51: the same guarantee), the plain one otherwise.
fn base_of(label: &str) -> usize {
    usize::from(label == DISTLOCK)
}

/// The scenarios, with their task counts given by the plan (S2's is `s2_tasks`).
pub(crate) const SCENARIOS: [&str; 2] = ["S1", "S2"];

/// One scenario on one server: each client's rounds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServerRun {
    /// `Redis 7.0.15` or `Valkey 9.1.2`.
    pub(crate) server: String,
    pub(crate) scenario: &'static str,
    pub(crate) tasks: usize,
    pub(crate) clients: Vec<ClientRounds>,
}

/// One client's cycles per second in each round, in round order.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClientRounds {
    pub(crate) client: String,
    pub(crate) per_second: Vec<f64>,
    pub(crate) median_per_second: f64,
    /// The hand-written lock this client is compared with (`base_of`).
    pub(crate) baseline: String,
    /// Median of this client's rounds over its baseline's median (1 for the plain one).
    pub(crate) ratio: f64,
    /// The lowest and highest ratio of one round to its baseline's same round.
    pub(crate) ratio_spread: (f64, f64),
    pub(crate) errors: u64,
    /// CPU time of this process per cycle over all the client's rounds, µs.
    pub(crate) client_cpu_us: f64,
    /// CPU time of the server per cycle over all the client's rounds, µs.
    pub(crate) server_cpu_us: f64,
    /// Server commands per cycle (those inside scripts counted too).
    pub(crate) commands_per_cycle: f64,
}

impl ServerRun {
    /// The client `label`'s rounds, if it ran.
    pub(crate) fn client(&self, label: &str) -> Option<&ClientRounds> {
        self.clients.iter().find(|c| c.client == label)
    }
}

/// The median of `values` (0 for none).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The steps [`run`] takes on one server, for the progress display.
pub(crate) fn steps(server: &str, rounds: u32, tasks_s2: usize) -> Vec<String> {
    SCENARIOS
        .iter()
        .map(|scenario| {
            let tasks = if *scenario == "S1" { 1 } else { tasks_s2 };
            format!("{scenario} on {server}, {tasks} task(s), {rounds} alternating rounds")
        })
        .collect()
}

/// Runs S1 and S2 on the server at `url` (named `server` in the report), `rounds` rounds of
/// `timing` each (warm-up and measured), every client in every round.
///
/// # Errors
/// A client that cannot connect, or a step that overruns its time.
pub(crate) fn run(
    runtime: &Runtime,
    progress: &mut Progress,
    server: &str,
    url: &str,
    rounds: u32,
    timing: Timing,
    tasks_s2: usize,
) -> Result<Vec<ServerRun>, String> {
    let mut probe = block(runtime, Duration::ZERO, Probe::connect(&[url.to_owned()]))?
        .map_err(|e| format!("connecting to {server}: {e}"))?;
    let clients: Vec<Client> = block(runtime, Duration::ZERO, async {
        let mut made = Vec::new();
        for label in CLIENTS {
            made.push(crate::client(label, url).await?);
        }
        Ok::<_, String>(made)
    })??;
    let mut out = Vec::new();
    for scenario in SCENARIOS {
        progress.next();
        let tasks = if scenario == "S1" { 1 } else { tasks_s2 };
        let mut rates: Vec<Vec<f64>> = CLIENTS.iter().map(|_| Vec::new()).collect();
        let mut windows: Vec<Vec<cycles::Window>> = CLIENTS.iter().map(|_| Vec::new()).collect();
        let mut errors = [0u64; CLIENTS.len()];
        for round in 0..rounds as usize {
            for k in 0..CLIENTS.len() {
                // Each round starts one client later: none always runs first or last.
                let i = (round + k) % CLIENTS.len();
                let name = format!("{}:{}:{}", slug(server), scenario, slug(CLIENTS[i]));
                let window = block(
                    runtime,
                    timing.warmup + timing.measure,
                    cycles::measure(
                        CLIENTS[i],
                        clients[i].clone(),
                        &name,
                        tasks,
                        timing,
                        &mut probe,
                    ),
                )??;
                rates[i].push(window.per_second());
                errors[i] += window.errors();
                windows[i].push(window);
            }
        }
        let clients = CLIENTS
            .iter()
            .zip(&rates)
            .zip(errors)
            .zip(windows)
            .map(|(((label, rounds), errors), windows)| {
                // The cost per cycle over every round of the client (the windows pooled).
                let cost = cycles::CycleRun::from_windows(scenario, label, tasks, windows).cost;
                let base = base_of(label);
                let per_round: Vec<f64> = rounds
                    .iter()
                    .zip(&rates[base])
                    .map(|(ours, theirs)| crate::stats::ratio(*ours, *theirs))
                    .collect();
                let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = per_round.iter().copied().fold(0.0, f64::max);
                let median_per_second = median(rounds);
                ClientRounds {
                    client: (*label).to_owned(),
                    per_second: rounds.clone(),
                    median_per_second,
                    baseline: CLIENTS[base].to_owned(),
                    ratio: crate::stats::ratio(median_per_second, median(&rates[base])),
                    ratio_spread: (lo, hi),
                    errors,
                    client_cpu_us: cost.client_cpu_us_per_op,
                    server_cpu_us: cost.server_cpu_us_per_op,
                    commands_per_cycle: cost.commands_per_op,
                }
            })
            .collect();
        out.push(ServerRun {
            server: server.to_owned(),
            scenario,
            tasks,
            clients,
        });
    }
    Ok(out)
}

/// The server's name and version from `INFO server`: `Valkey 9.1.2` (its `valkey_version`) or
/// `Redis 7.0.15`.
pub(crate) async fn describe(url: &str) -> redis::RedisResult<String> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await?;
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_owned())
    };
    Ok(match field("valkey_version:") {
        Some(version) => format!("Valkey {version}"),
        None => format!(
            "Redis {}",
            field("redis_version:").unwrap_or_else(|| "unknown".to_owned())
        ),
    })
}

/// The per-server targets (issue 51): on Redis and on Valkey, in S1 and S2, distlock with
/// `fencing(false)` at ≥ 0.9× the hand-written lock and distlock fenced at ≥ 0.9× the
/// hand-written fenced lock (ratios of medians over alternating rounds, on the same server);
/// and the client's CPU per S2 cycle on Redis within 1.2× its baseline's. Not run for a server
/// that did not run.
pub(crate) fn targets(runs: &[ServerRun]) -> Vec<crate::target::Target> {
    use crate::target::{not_run, target};
    const GOAL: f64 = 0.9;
    const CPU_GOAL: f64 = 1.2;
    let mut out = Vec::new();
    for server in ["Redis", "Valkey"] {
        for scenario in SCENARIOS {
            for client in [UNFENCED, DISTLOCK] {
                let (id, what) = describe_target(server, scenario, client);
                let shown = "≥ 0.9×";
                let found = runs
                    .iter()
                    .filter(|r| r.server.starts_with(server) && r.scenario == scenario)
                    .find_map(|r| r.client(client));
                out.push(match found {
                    Some(c) => target(
                        id,
                        "51",
                        what,
                        shown,
                        format!(
                            "{:.2}× {} (rounds {:.2}–{:.2}×, {} rounds)",
                            c.ratio,
                            c.baseline,
                            c.ratio_spread.0,
                            c.ratio_spread.1,
                            c.per_second.len()
                        ),
                        c.ratio >= GOAL,
                    ),
                    None => not_run(id, "51", what, shown),
                });
            }
        }
    }
    // The client's CPU per S2 cycle on Redis against its baseline's, over the same rounds.
    let s2 = runs
        .iter()
        .find(|r| r.server.starts_with("Redis") && r.scenario == "S2");
    for (client, id, what) in [
        (
            UNFENCED,
            "Redis S2 client CPU, no fencing",
            "client CPU per S2 cycle on Redis, fencing(false) against the hand-written lock",
        ),
        (
            DISTLOCK,
            "Redis S2 client CPU, fenced",
            "client CPU per S2 cycle on Redis, fenced against the hand-written fenced lock",
        ),
    ] {
        let shown = "≤ 1.2× its hand-written lock";
        let base = CLIENTS[base_of(client)];
        out.push(
            match s2.and_then(|r| Some((r.client(client)?, r.client(base)?))) {
                Some((ours, theirs)) => {
                    let x = crate::stats::ratio(ours.client_cpu_us, theirs.client_cpu_us);
                    target(
                        id,
                        "51",
                        what,
                        shown,
                        format!(
                            "{x:.2}× ({:.1} vs {:.1} µs)",
                            ours.client_cpu_us, theirs.client_cpu_us
                        ),
                        x <= CPU_GOAL,
                    )
                }
                None => not_run(id, "51", what, shown),
            },
        );
    }
    out
}

/// The id and description of one server × scenario × client ratio target (static strings: the
/// run's JSON keeps them as they are).
fn describe_target(server: &str, scenario: &str, client: &str) -> (&'static str, &'static str) {
    match (server, scenario, client == DISTLOCK) {
        ("Redis", "S1", false) => (
            "Redis S1 no fencing vs hand",
            "S1 on Redis, fencing(false) against the hand-written lock, medians of rounds",
        ),
        ("Redis", "S1", true) => (
            "Redis S1 fenced vs hand fenced",
            "S1 on Redis, fenced against the hand-written fenced lock, medians of rounds",
        ),
        ("Redis", _, false) => (
            "Redis S2 no fencing vs hand",
            "S2 on Redis, fencing(false) against the hand-written lock, medians of rounds",
        ),
        ("Redis", _, true) => (
            "Redis S2 fenced vs hand fenced",
            "S2 on Redis, fenced against the hand-written fenced lock, medians of rounds",
        ),
        (_, "S1", false) => (
            "Valkey S1 no fencing vs hand",
            "S1 on Valkey, fencing(false) against the hand-written lock, medians of rounds",
        ),
        (_, "S1", true) => (
            "Valkey S1 fenced vs hand fenced",
            "S1 on Valkey, fenced against the hand-written fenced lock, medians of rounds",
        ),
        (_, _, false) => (
            "Valkey S2 no fencing vs hand",
            "S2 on Valkey, fencing(false) against the hand-written lock, medians of rounds",
        ),
        (_, _, true) => (
            "Valkey S2 fenced vs hand fenced",
            "S2 on Valkey, fenced against the hand-written fenced lock, medians of rounds",
        ),
    }
}
