//! One sweep of the store (`Store::list`, as `ls`) serves the page, the API and the metrics:
//! it is kept for at most `--refresh`, and concurrent requests wait for the one sweep under
//! way instead of starting their own (single flight), so the store's load does not grow with
//! the number of open pages or scrapers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::Mutex;

use crate::cli::ScanArgs;
use crate::inspect::{LockInfo, description};
use crate::store::Store;

/// What one sweep found, with when each lock's hold began.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The held locks (elections among them, kind `election`), sorted by name and kind.
    pub(crate) locks: Vec<Held>,
    /// Whether the store's walk stopped at its step limit.
    pub(crate) truncated: bool,
    /// When the sweep ended, by this machine's clock (Unix ms).
    pub(crate) taken_ms: u64,
    /// How long the sweep took.
    pub(crate) sweep: Duration,
}

/// One held lock and since when it is held.
#[derive(Debug)]
pub(crate) struct Held {
    /// The lock as the store read it.
    pub(crate) info: LockInfo,
    /// When the hold began (Unix ms): the holder's own `since_ms` (its description, or the
    /// election's record) when it wrote one, else when this server first saw this holder.
    pub(crate) since_ms: u64,
    /// Whether `since_ms` is the holder's word (`holder`) or this server's (`first_seen`, a
    /// lower bound of the hold's age).
    pub(crate) since_source: &'static str,
}

/// The last sweep's failure.
#[derive(Debug)]
pub(crate) struct SweepError {
    /// What failed, in one line.
    pub(crate) message: String,
    /// When the failing sweep ended (Unix ms).
    pub(crate) at_ms: u64,
}

/// What a request is served: the last good snapshot (`None` before the first) and, when the
/// last sweep failed, its failure.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub(crate) snapshot: Option<Arc<Snapshot>>,
    pub(crate) error: Option<Arc<SweepError>>,
    /// Sweeps done since the start (successful or not).
    pub(crate) sweeps: u64,
}

impl View {
    /// Whether the last sweep succeeded.
    pub(crate) fn up(&self) -> bool {
        self.error.is_none() && self.snapshot.is_some()
    }
}

/// A holder, as first seen: the same name, kind and token is the same hold.
type HoldKey = (String, &'static str, Option<String>);

/// The cache of sweeps.
#[derive(Debug)]
struct State {
    snapshot: Option<Arc<Snapshot>>,
    error: Option<Arc<SweepError>>,
    /// When the last sweep (good or not) started: the next one waits for `refresh` after it,
    /// so a failing store is not hammered either.
    attempted: Option<Instant>,
    first_seen: HashMap<HoldKey, u64>,
    sweeps: u64,
}

/// Told every good sweep's snapshot, in order (the console's history).
pub(crate) type OnSweep = Box<dyn Fn(&Snapshot) + Send + Sync>;

/// The store's snapshots, swept at most once per `refresh`.
pub(crate) struct Cache {
    store: Arc<dyn Store>,
    pattern: String,
    scan: ScanArgs,
    refresh: Duration,
    on_sweep: OnSweep,
    state: Mutex<State>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("backend", &self.store.backend())
            .field("pattern", &self.pattern)
            .field("refresh", &self.refresh)
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// A cache of `store`'s locks matching `pattern`, swept at most once per `refresh`, that
    /// tells `on_sweep` each good sweep's snapshot.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        pattern: String,
        scan: ScanArgs,
        refresh: Duration,
        on_sweep: OnSweep,
    ) -> Self {
        Self {
            store,
            pattern,
            scan,
            refresh,
            on_sweep,
            state: Mutex::new(State {
                snapshot: None,
                error: None,
                attempted: None,
                first_seen: HashMap::new(),
                sweeps: 0,
            }),
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The current view: the cached one if the last sweep started less than `refresh` ago,
    /// else a new sweep's. Concurrent callers share one sweep: the first sweeps while holding
    /// the state's lock, the others wait for it and are served its result.
    ///
    /// # Cancel safety
    /// Cancel safe: a caller dropped mid-sweep drops that sweep; the state is unchanged and
    /// the next caller sweeps.
    pub(crate) async fn view(&self) -> View {
        let mut state = self.state.lock().await;
        if state.attempted.is_none_or(|t| t.elapsed() >= self.refresh) {
            self.sweep(&mut state).await;
        }
        View {
            snapshot: state.snapshot.clone(),
            error: state.error.clone(),
            sweeps: state.sweeps,
        }
    }

    /// Makes the next [`Cache::view`] sweep (after a release: the page shows it at once).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn invalidate(&self) {
        self.state.lock().await.attempted = None;
    }

    /// One sweep into `state`: a good one replaces the snapshot; a failed one keeps it and
    /// records the failure.
    async fn sweep(&self, state: &mut State) {
        let started = Instant::now();
        state.attempted = Some(started);
        state.sweeps += 1;
        let result = self.store.list(&self.pattern, &self.scan).await;
        let taken_ms = now_ms();
        match result {
            Ok(listing) => {
                let mut first_seen = HashMap::with_capacity(listing.locks.len());
                let locks = listing
                    .locks
                    .into_iter()
                    .map(|info| {
                        let key = (info.name.clone(), info.kind, info.token.clone());
                        let seen = state.first_seen.get(&key).copied().unwrap_or(taken_ms);
                        first_seen.insert(key, seen);
                        let (since_ms, since_source) = match holder_since(&info) {
                            Some(since) => (since, "holder"),
                            None => (seen, "first_seen"),
                        };
                        Held {
                            info,
                            since_ms,
                            since_source,
                        }
                    })
                    .collect();
                // Only the holds seen now are remembered: a released one starts again.
                state.first_seen = first_seen;
                let snapshot = Arc::new(Snapshot {
                    locks,
                    truncated: listing.truncated,
                    taken_ms,
                    sweep: started.elapsed(),
                });
                (self.on_sweep)(&snapshot);
                state.snapshot = Some(snapshot);
                if state.error.take().is_some() {
                    tracing::warn!("the store answers again");
                }
            }
            Err(failure) => {
                // Once per outage, not once per --refresh.
                if state.error.is_none() {
                    tracing::warn!(error = %failure.message, "the store's sweep failed");
                }
                state.error = Some(Arc::new(SweepError {
                    message: failure.message,
                    at_ms: taken_ms,
                }));
            }
        }
    }
}

/// When the holder says its hold began: an election's leader since, or the `since_ms` of the
/// holder's description.
fn holder_since(info: &LockInfo) -> Option<u64> {
    if let Some(since) = info.leader.as_ref().and_then(|l| l.since_ms) {
        return Some(since);
    }
    if let Some(since) = info.since_ms {
        return Some(since);
    }
    description(info.holder.as_ref()?)
        .get("since_ms")
        .and_then(serde_json::Value::as_u64)
}

/// This machine's clock, Unix ms.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .ok()
        .and_then(|d| u64::try_from(d.as_millis()).ok())
        .unwrap_or(0)
}
