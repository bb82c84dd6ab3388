//! Records the locker's renewals in the history, through the `metrics` facade: the watchdog
//! counts every renewal it finishes in `distlock_renewals_total{outcome}`, and this recorder
//! turns each count into a history line. That is how the checker sees a renewal sent after a
//! release, which the guard's API cannot show.

use std::sync::Arc;

use distlock::metrics as metric;
use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};

use crate::history::{Event, HistoryWriter};

/// A recorder that only listens for renewals; every other metric is a no-op.
#[derive(Debug)]
pub(crate) struct RenewalRecorder {
    history: Arc<HistoryWriter>,
}

impl RenewalRecorder {
    pub(crate) fn new(history: Arc<HistoryWriter>) -> RenewalRecorder {
        RenewalRecorder { history }
    }
}

/// One renewal outcome's counter.
#[derive(Debug)]
struct RenewalCounter {
    history: Arc<HistoryWriter>,
    outcome: String,
}

impl CounterFn for RenewalCounter {
    fn increment(&self, value: u64) {
        for _ in 0..value.min(1_000) {
            self.history.record(Event::Renewal {
                outcome: self.outcome.clone(),
            });
        }
    }

    fn absolute(&self, _value: u64) {}
}

impl Recorder for RenewalRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        if key.name() != metric::RENEWALS_TOTAL {
            return Counter::noop();
        }
        let outcome = key
            .labels()
            .find(|label| label.key() == "outcome")
            .map_or_else(|| "unknown".to_owned(), |label| label.value().to_owned());
        Counter::from_arc(Arc::new(RenewalCounter {
            history: Arc::clone(&self.history),
            outcome,
        }))
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}
