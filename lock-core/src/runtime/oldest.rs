//! The oldest hold per series (`distlock_oldest_held_seconds`), as the watchdogs see it.
//!
//! Each watchdog (one per `Locker` and runtime) knows only its own leases, but the gauge is
//! the process's: a service with a runtime per component, or two `Locker`s over the same
//! backend, has several watchdogs reporting the same series. A gauge set by each in turn
//! would flap between their values, so each one files the oldest grant it saw per series in
//! one table for the process, and the gauge is set from the oldest of all. A series none of
//! them holds any more is set to 0 once, then left alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use metrics::SharedString;
use tokio::time::Instant;

use crate::metric::{Labels, OLDEST_HELD_SECONDS};
use crate::runtime::held::HeldLease;

/// How often a watchdog reports while its runtime's guards hold anything.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One series of the gauge: the labels of the holds it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Series {
    backend: &'static str,
    lock: SharedString,
    kind: &'static str,
}

/// A series' labels, borrowed from a lease.
type Key<'a> = (&'static str, &'a str, &'static str);

impl Series {
    fn of(labels: &Labels) -> Self {
        Self {
            backend: labels.backend,
            lock: labels.lock.clone(),
            kind: labels.kind,
        }
    }

    fn is(&self, (backend, lock, kind): Key<'_>) -> bool {
        self.backend == backend && self.kind == kind && &*self.lock == lock
    }

    fn set(&self, seconds: f64) {
        metrics::gauge!(
            OLDEST_HELD_SECONDS,
            "backend" => self.backend,
            "lock" => self.lock.clone(),
            "kind" => self.kind
        )
        .set(seconds);
    }
}

/// A series and, for each watchdog that holds any of it, the oldest grant it saw last time.
struct Entry {
    series: Series,
    oldest: Vec<(u64, Instant)>,
}

/// Every series some watchdog of the process holds (a handful: one per label template and
/// kind in use), looked up by a scan.
static TABLE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

static NEXT_REPORTER: AtomicU64 = AtomicU64::new(0);

/// One watchdog's share of the table. Dropped with the watchdog (its runtime went, or its
/// `Locker` and guards are all gone), it takes its holds out of the gauge: their leases, if
/// still held, are reported again by the watchdog that adopts them.
pub(crate) struct Reporter {
    id: u64,
    /// The series this reporter has an entry in.
    mine: Vec<Series>,
}

impl Reporter {
    pub(crate) fn new() -> Self {
        Self {
            id: NEXT_REPORTER.fetch_add(1, Ordering::Relaxed),
            mine: Vec::new(),
        }
    }

    /// Files the oldest grant per series among `held` (leases whose guards live), and sets
    /// the gauge of every series that changed hands here to the age of the process's oldest
    /// hold of it at `now` (0 when it has none left).
    pub(crate) fn report<'a>(&mut self, held: impl Iterator<Item = &'a HeldLease>, now: Instant) {
        // Keyed by the labels borrowed from the leases: no copy of a label per lease.
        let mut oldest: HashMap<Key<'a>, (Instant, &'a Labels), foldhash::fast::RandomState> =
            HashMap::default();
        let mut file = |key: Key<'a>, at: Instant, labels: &'a Labels| {
            oldest
                .entry(key)
                .and_modify(|(first, _)| *first = (*first).min(at))
                .or_insert((at, labels));
        };
        // Neighbouring leases mostly share a series (granted in turn by the same code): the
        // run is compared, not hashed, and filed once (at 100,000 held locks, hashing each
        // lease's labels every second was the watchdog's largest cost).
        let mut run: Option<(Key<'a>, Instant, &'a Labels)> = None;
        for lease in held {
            let labels = lease.labels();
            let key = (labels.backend, &*labels.lock, labels.kind);
            let at = lease.acquired_at();
            match &mut run {
                Some((same, first, _)) if *same == key => *first = (*first).min(at),
                _ => {
                    if let Some((key, first, labels)) = run.replace((key, at, labels)) {
                        file(key, first, labels);
                    }
                }
            }
        }
        if let Some((key, first, labels)) = run {
            file(key, first, labels);
        }
        if oldest.is_empty() && self.mine.is_empty() {
            return;
        }
        let mut settings = Vec::with_capacity(oldest.len() + self.mine.len());
        let mut mine = Vec::with_capacity(oldest.len());
        {
            let mut table = TABLE.lock().unwrap_or_else(PoisonError::into_inner);
            for (&key, &(at, labels)) in &oldest {
                let entry = match table.iter().position(|e| e.series.is(key)) {
                    Some(found) => &mut table[found],
                    None => {
                        // Copied once per series, from any of its leases.
                        table.push(Entry {
                            series: Series::of(labels),
                            oldest: Vec::new(),
                        });
                        table.last_mut().expect("just pushed")
                    }
                };
                match entry.oldest.iter_mut().find(|(id, _)| *id == self.id) {
                    Some((_, first)) => *first = at,
                    None => entry.oldest.push((self.id, at)),
                }
                mine.push(entry.series.clone());
                settings.push((entry.series.clone(), age(&entry.oldest, now)));
            }
            // Series this reporter held last time and holds no more.
            for series in &self.mine {
                if mine.contains(series) {
                    continue;
                }
                let Some(found) = table.iter().position(|e| e.series == *series) else {
                    continue;
                };
                let entry = &mut table[found];
                entry.oldest.retain(|(id, _)| *id != self.id);
                settings.push((series.clone(), age(&entry.oldest, now)));
                if entry.oldest.is_empty() {
                    table.swap_remove(found);
                }
            }
        }
        self.mine = mine;
        // Set outside the table's lock: a recorder's own locking never holds up other
        // watchdogs.
        for (series, seconds) in settings {
            series.set(seconds);
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.report(std::iter::empty(), Instant::now());
    }
}

/// The age in seconds of the oldest of `oldest` at `now`; 0 when empty.
fn age(oldest: &[(u64, Instant)], now: Instant) -> f64 {
    oldest.iter().map(|(_, at)| *at).min().map_or(0.0, |first| {
        now.saturating_duration_since(first).as_secs_f64()
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};

    use super::*;
    use crate::{Lease, Token};

    const LABEL: &str = "oldest-unit:{id}";

    fn held(acquired_at: Instant) -> Arc<HeldLease> {
        let token = Token::generate().expect("the OS random source");
        let lease = Lease::new("n", token, 0, acquired_at);
        let labels = Labels::new(
            "memory",
            "mutex",
            Some(SharedString::const_str(LABEL)),
            Labels::unlabelled_set("memory", "mutex"),
        );
        let ttl = Duration::from_secs(30);
        Arc::new(HeldLease::new(
            &lease,
            labels,
            Some(ttl),
            None,
            ttl / 5,
            acquired_at,
        ))
    }

    fn gauge(snapshotter: &Snapshotter) -> Option<f64> {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| match value {
                DebugValue::Gauge(g) if key.key().name() == OLDEST_HELD_SECONDS => {
                    Some(g.into_inner())
                }
                _ => None,
            })
    }

    /// Two watchdogs (two runtimes, or two lockers) hold the same series: the gauge is the
    /// older of their holds whichever reports last, the other's once one's holds end, and 0
    /// once both are gone.
    #[test]
    fn the_gauge_is_the_oldest_hold_of_every_watchdog() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::with_local_recorder(&recorder, || {
            let now = Instant::now() + Duration::from_secs(100);
            let old = held(now - Duration::from_secs(10));
            let young = held(now - Duration::from_secs(3));
            let (mut first, mut second) = (Reporter::new(), Reporter::new());
            first.report(std::iter::once(&*old), now);
            second.report(std::iter::once(&*young), now);
            assert_eq!(
                gauge(&snapshotter),
                Some(10.0),
                "the older, though reported first"
            );
            first.report(std::iter::empty(), now);
            assert_eq!(gauge(&snapshotter), Some(3.0), "the older ended");
            second.report(std::iter::once(&*young), now + Duration::from_secs(1));
            assert_eq!(gauge(&snapshotter), Some(4.0));
            drop(second);
            assert_eq!(gauge(&snapshotter), Some(0.0), "no hold left");
            assert!(
                !TABLE
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .any(|entry| &*entry.series.lock == LABEL),
                "a series no one holds leaves the table"
            );
            drop(first);
        });
    }
}
