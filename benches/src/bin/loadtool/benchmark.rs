//! The bare-Redis baselines: `redis-benchmark` against the same server, in the same run.
//!
//! On one connection, one request at a time, `SET NX PX` and the compare-and-delete `EVALSHA`
//! are the two round trips of the simplest possible lock cycle: no client can do a cycle faster
//! than their sum, so that sum is the *round-trip limit*. Pipelined — 32 requests in flight on
//! one connection, the shape of 32 tasks sharing one multiplexed connection — the same two
//! commands give the *pipelined ceiling* S2 is compared with. The same again over 8 such
//! connections is recorded as the server's own ceiling, for reference.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

/// Requests in flight on the connection in the pipelined runs.
pub(crate) const PIPELINE: usize = 32;

/// Connections of the server-ceiling runs.
pub(crate) const SERVER_CONNECTIONS: usize = 8;

const SET_1: &str = "SET NX PX, 1 connection";
const DEL_1: &str = "EVALSHA compare-and-delete, 1 connection";
const SET_P: &str = "SET NX PX, pipelined";
const DEL_P: &str = "EVALSHA compare-and-delete, pipelined";
const SET_P8: &str = "SET NX PX, pipelined, 8 connections";
const DEL_P8: &str = "EVALSHA compare-and-delete, pipelined, 8 connections";

/// Keys the benchmark spreads its requests over (`-r`), so `SET NX` mostly sets.
const KEYSPACE: &str = "100000";

/// One `redis-benchmark` run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Bench {
    /// What it measures, e.g. `"SET NX PX, 1 connection"`.
    pub(crate) name: String,
    /// The command line given to redis-benchmark after the connection options.
    pub(crate) command: String,
    pub(crate) clients: usize,
    pub(crate) pipeline: usize,
    pub(crate) requests: u64,
    /// Requests per second.
    pub(crate) rps: f64,
    pub(crate) avg_us: f64,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
}

impl Bench {
    /// Several runs of one spec as one: requests over total time; the mean of the
    /// percentiles (redis-benchmark reports no samples to pool).
    pub(crate) fn merge(runs: &[Bench]) -> Option<Bench> {
        let first = runs.first()?;
        let requests: u64 = runs.iter().map(|r| r.requests).sum();
        let time: f64 = runs
            .iter()
            .map(|r| r.requests as f64 / r.rps.max(1e-9))
            .sum();
        let mean = |f: fn(&Bench) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
        Some(Bench {
            requests,
            rps: requests as f64 / time.max(1e-9),
            avg_us: mean(|r| r.avg_us),
            p50_us: mean(|r| r.p50_us),
            p99_us: mean(|r| r.p99_us),
            ..first.clone()
        })
    }
}

/// The limits a lock cycle is compared with.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Baselines {
    /// Every run (runs repeated in rounds merged into one).
    pub(crate) runs: Vec<Bench>,
    /// One connection, one request at a time: cycles/s of `SET NX PX` + `EVALSHA`.
    pub(crate) round_trip_limit_per_s: Option<f64>,
    /// The latency of that cycle: the sum of the two medians, µs.
    pub(crate) round_trip_limit_p50_us: Option<f64>,
    /// Pipelined on one connection: cycles/s of `SET NX PX` + `EVALSHA`.
    pub(crate) pipelined_ceiling_per_s: Option<f64>,
    /// Pipelined on 8 connections: cycles/s of `SET NX PX` + `EVALSHA` (the server's ceiling).
    pub(crate) server_ceiling_per_s: Option<f64>,
    /// Why there are none, when redis-benchmark could not be run.
    pub(crate) unavailable: Option<String>,
}

/// The redis-benchmark executable: beside the redis-server lock-testkit uses, else on `PATH`.
pub(crate) fn binary() -> Option<PathBuf> {
    let beside = lock_testkit::try_redis_server_binary()
        .ok()
        .and_then(|server| server.parent().map(|dir| dir.join("redis-benchmark")))
        .filter(|p| p.is_file());
    beside.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("redis-benchmark"))
                .find(|p| p.is_file())
        })
    })
}

/// One of the runs that make the baselines.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) args: Vec<String>,
    pub(crate) clients: usize,
    pub(crate) pipeline: usize,
    pub(crate) requests: u64,
}

/// The one-connection runs of the round-trip limit (S1 interleaves them with its clients),
/// for a server where the compare-and-delete script has the SHA1 `release_sha`.
pub(crate) fn round_trip_specs(release_sha: &str, requests: u64) -> Vec<Spec> {
    specs(release_sha, requests, 0)
        .into_iter()
        .filter(|s| s.name == SET_1 || s.name == DEL_1)
        .collect()
}

/// The other runs: PING on one connection, and the pipelined runs.
pub(crate) fn other_specs(release_sha: &str, single: u64, pipelined: u64) -> Vec<Spec> {
    specs(release_sha, single, pipelined)
        .into_iter()
        .filter(|s| s.name != SET_1 && s.name != DEL_1)
        .collect()
}

/// Every run.
fn specs(release_sha: &str, single: u64, pipelined: u64) -> Vec<Spec> {
    let set = [
        "SET",
        "bench:lock:__rand_int__",
        "token",
        "NX",
        "PX",
        "10000",
    ];
    let del = [
        "EVALSHA",
        release_sha,
        "1",
        "bench:lock:__rand_int__",
        "token",
    ];
    let spec = |name, args: &[&str], clients, pipeline, requests| Spec {
        name,
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        clients,
        pipeline,
        requests,
    };
    vec![
        spec("PING, 1 connection", &["PING"], 1, 1, single),
        spec(SET_1, &set, 1, 1, single),
        spec(DEL_1, &del, 1, 1, single),
        spec(SET_P, &set, 1, PIPELINE, pipelined),
        spec(DEL_P, &del, 1, PIPELINE, pipelined),
        spec(SET_P8, &set, SERVER_CONNECTIONS, PIPELINE, pipelined * 2),
        spec(DEL_P8, &del, SERVER_CONNECTIONS, PIPELINE, pipelined * 2),
    ]
}

/// Runs `spec` against `127.0.0.1:port`, killing it (by its PID) after `limit`.
pub(crate) fn run(
    binary: &PathBuf,
    port: u16,
    spec: &Spec,
    limit: Duration,
) -> Result<Bench, String> {
    let mut cmd = Command::new(binary);
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-c", &spec.clients.to_string()])
        .args(["-P", &spec.pipeline.to_string()])
        .args(["-n", &spec.requests.to_string(), "-r", KEYSPACE, "--csv"])
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "redis-benchmark took longer than {limit:?}; killed"
                ));
            }
            Err(e) => return Err(format!("waiting for redis-benchmark: {e}")),
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("reading redis-benchmark's output: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let row = parse_csv(&stdout).ok_or_else(|| {
        format!(
            "unexpected redis-benchmark output: {}{}",
            stdout.trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })?;
    Ok(Bench {
        name: spec.name.to_owned(),
        command: spec.args.join(" "),
        clients: spec.clients,
        pipeline: spec.pipeline,
        requests: spec.requests,
        rps: row.rps,
        avg_us: row.avg_ms * 1e3,
        p50_us: row.p50_ms * 1e3,
        p99_us: row.p99_ms * 1e3,
    })
}

/// The numbers of one `--csv` result row.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Row {
    rps: f64,
    avg_ms: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// The last data row of redis-benchmark's `--csv` output:
/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`.
fn parse_csv(text: &str) -> Option<Row> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('"') && !l.starts_with("\"test\""))?;
    // The test name may contain commas, never quotes: the numbers are the last 7 fields.
    let fields: Vec<f64> = line
        .rsplitn(8, ',')
        .take(7)
        .map(|f| f.trim().trim_matches('"').parse::<f64>())
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    // rsplitn yields from the end: max, p99, p95, p50, min, avg, rps.
    Some(Row {
        rps: fields[6],
        avg_ms: fields[5],
        p50_ms: fields[3],
        p99_ms: fields[1],
    })
}

impl Baselines {
    /// Derives the limits from the runs.
    pub(crate) fn from_runs(runs: Vec<Bench>) -> Self {
        let find = |name: &str| runs.iter().find(|b| b.name == name);
        let cycle = |a: Option<&Bench>, b: Option<&Bench>| match (a, b) {
            (Some(a), Some(b)) if a.rps > 0.0 && b.rps > 0.0 => {
                Some(1.0 / (1.0 / a.rps + 1.0 / b.rps))
            }
            _ => None,
        };
        let (set1, del1) = (find(SET_1), find(DEL_1));
        let round_trip_limit_per_s = cycle(set1, del1);
        let round_trip_limit_p50_us = set1.zip(del1).map(|(a, b)| a.p50_us + b.p50_us);
        let pipelined_ceiling_per_s = cycle(find(SET_P), find(DEL_P));
        let server_ceiling_per_s = cycle(find(SET_P8), find(DEL_P8));
        Self {
            round_trip_limit_per_s,
            round_trip_limit_p50_us,
            pipelined_ceiling_per_s,
            server_ceiling_per_s,
            runs,
            unavailable: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_csv() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"SET bench:__rand_int__ tok NX PX 10000\",\"12698.41\",\"0.073\",\"0.016\",\"0.079\",\"0.111\",\"0.159\",\"3.151\"\n";
        let row = parse_csv(out).expect("a row");
        assert_eq!(
            row,
            Row {
                rps: 12698.41,
                avg_ms: 0.073,
                p50_ms: 0.079,
                p99_ms: 0.159
            }
        );
        assert_eq!(parse_csv("garbage"), None);
    }

    #[test]
    fn merged_runs_pool_requests_over_time() {
        let run = |rps: f64, p50_us: f64| Bench {
            name: SET_1.into(),
            command: String::new(),
            clients: 1,
            pipeline: 1,
            requests: 1000,
            rps,
            avg_us: p50_us,
            p50_us,
            p99_us: p50_us,
        };
        let merged = Bench::merge(&[run(1000.0, 10.0), run(500.0, 20.0)]).expect("merged");
        assert_eq!(merged.requests, 2000);
        assert!((merged.rps - 2000.0 / 3.0).abs() < 1e-9);
        assert!((merged.p50_us - 15.0).abs() < 1e-9);
        assert!(Bench::merge(&[]).is_none());
    }

    #[test]
    fn limits_combine_the_two_round_trips() {
        let bench = |name: &str, rps: f64, p50_us: f64| Bench {
            name: name.into(),
            command: String::new(),
            clients: 1,
            pipeline: 1,
            requests: 1,
            rps,
            avg_us: p50_us,
            p50_us,
            p99_us: p50_us,
        };
        let b = Baselines::from_runs(vec![
            bench(SET_1, 10_000.0, 50.0),
            bench(DEL_1, 10_000.0, 60.0),
        ]);
        assert!((b.round_trip_limit_per_s.expect("limit") - 5_000.0).abs() < 1e-6);
        assert!((b.round_trip_limit_p50_us.expect("p50") - 110.0).abs() < 1e-9);
        assert_eq!(b.pipelined_ceiling_per_s, None);
    }
}
