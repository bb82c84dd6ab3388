//! S4's counting passes: do back-to-back cycles of one client find their own previous lease
//! still on a node? Nobody else uses the name, so anything a fresh cycle finds there is the
//! client's own last lease, which its release had not yet removed.
//!
//! Each pass runs on its own, after S4's timed windows, so that counting never slows them:
//!
//! - **busy answers** (distlock's Redlock): every node is wrapped in a [`Lock`](lock_core::backend::Lock) that counts
//!   its busy answers to `try_acquire` — what the Redlock itself was told. rslock does not
//!   expose its nodes' answers, so it has no such count.
//! - **keys left after release** (every client): after each release returns, `EXISTS` on
//!   every node over a plain connection of its own, all nodes at once; a key still there is a
//!   lease the release returned before removing. The check delays the next cycle by a round
//!   trip, so this pass runs apart from the busy-answer pass.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use serde::Serialize;

use crate::counted::Counted;
use crate::cycles::Client;

/// The figures are reported per this many cycles (the unit the S4 target is stated in).
pub(crate) const PER_CYCLES: f64 = 20_000.0;

/// How long a pass may run at most, whatever its cycle count.
const PASS_LIMIT: Duration = Duration::from_secs(60);

/// One client's counting passes at one node count.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StaleRun {
    pub(crate) client: String,
    pub(crate) nodes: usize,
    /// Busy answers of the nodes in the busy-answer pass (`None`: the client does not expose
    /// its nodes' answers).
    pub(crate) busy_answers: Option<u64>,
    /// Cycles of the busy-answer pass.
    pub(crate) busy_cycles: u64,
    /// The same per [`PER_CYCLES`] cycles.
    pub(crate) busy_answers_per_20k: Option<f64>,
    /// Releases after which the key was still on at least one node, in the key pass.
    pub(crate) stale_releases: u64,
    /// Keys found still there, summed over the nodes.
    pub(crate) stale_keys: u64,
    /// Cycles of the key pass.
    pub(crate) key_cycles: u64,
    /// Releases that left a key, per [`PER_CYCLES`] cycles.
    pub(crate) stale_releases_per_20k: f64,
    pub(crate) errors: u64,
    pub(crate) first_error: Option<String>,
}

/// The counting passes of `client` on the nodes at `urls` (`busy` counts the nodes' answers
/// when the client was built over [`Counted`]s; `client` is used for both passes),
/// `cycles` cycles each, on the name `name`.
pub(crate) async fn run(
    label: &str,
    client: &Client,
    busy: Option<&[Arc<Counted>]>,
    urls: &[String],
    name: &str,
    cycles: u64,
) -> Result<StaleRun, String> {
    let name: Arc<str> = Arc::from(name);
    let mut errors = Errors::default();

    let busy_answers = match busy {
        Some(counters) => {
            let before: u64 = counters.iter().map(|c| c.busy()).sum();
            let (done, ..) = pass(client, &name, cycles, None, &mut errors).await;
            // A node answering after the quorum still reaches its counter: let it.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let after: u64 = counters.iter().map(|c| c.busy()).sum();
            Some((after - before, done))
        }
        None => None,
    };

    let mut probes = Vec::with_capacity(urls.len());
    for url in urls {
        let conn = redis::Client::open(url.as_str())
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        probes.push(conn);
    }
    let (key_cycles, stale_releases, stale_keys) =
        pass(client, &name, cycles, Some(&probes), &mut errors).await;

    let per = |n: u64, of: u64| crate::stats::ratio(n as f64 * PER_CYCLES, of as f64);
    Ok(StaleRun {
        client: label.to_owned(),
        nodes: urls.len(),
        busy_answers: busy_answers.map(|(n, _)| n),
        busy_cycles: busy_answers.map_or(0, |(_, c)| c),
        busy_answers_per_20k: busy_answers.map(|(n, c)| per(n, c)),
        stale_releases,
        stale_keys,
        key_cycles,
        stale_releases_per_20k: per(stale_releases, key_cycles),
        errors: errors.count,
        first_error: errors.first,
    })
}

/// Errors of a pass: how many, and the first.
#[derive(Default)]
struct Errors {
    count: u64,
    first: Option<String>,
}

impl Errors {
    fn note(&mut self, error: String) {
        self.count += 1;
        self.first.get_or_insert(error);
    }
}

/// `cycles` back-to-back cycles of `client` on `name` (at most [`PASS_LIMIT`]); with
/// `probes`, the key check after each. Returns the cycles done, the releases that left a key
/// and the keys left, summed over the nodes.
async fn pass(
    client: &Client,
    name: &Arc<str>,
    cycles: u64,
    probes: Option<&[MultiplexedConnection]>,
    errors: &mut Errors,
) -> (u64, u64, u64) {
    let started = tokio::time::Instant::now();
    let (mut done, mut releases, mut keys) = (0, 0, 0);
    for _ in 0..cycles {
        if started.elapsed() > PASS_LIMIT {
            break;
        }
        if let Err(error) = client.cycle(name).await {
            errors.note(error);
            // A failing server must not turn this into a busy loop.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        }
        done += 1;
        let Some(probes) = probes else { continue };
        match left_on(probes, name).await {
            Ok(0) => {}
            Ok(n) => {
                releases += 1;
                keys += n;
            }
            Err(error) => errors.note(error),
        }
    }
    (done, releases, keys)
}

/// On how many of the nodes `probes` the key `name` still exists (asked of all at once).
async fn left_on(probes: &[MultiplexedConnection], name: &str) -> Result<u64, String> {
    let answers = join_all(probes.iter().map(|conn| {
        let mut conn = conn.clone();
        async move {
            redis::cmd("EXISTS")
                .arg(name)
                .query_async::<u64>(&mut conn)
                .await
        }
    }))
    .await;
    answers
        .into_iter()
        .try_fold(0, |sum, n| Ok(sum + n.map_err(|e| e.to_string())?))
}
