//! The watchdog: one task per `Locker` that keeps every renewing lease alive.
//!
//! One task and a min-heap of due times, not a task per guard, so 10,000 held locks cost one
//! timer. All leases due at one moment are extended together through `Lock::extend_many`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::held::Held;
use crate::metric;
use crate::{Lease, Lock, LockError};

/// Leases due within this much of the earliest are renewed in the same batch.
const BATCH_WINDOW: Duration = Duration::from_millis(50);

/// The most leases sent in one `extend_many` call.
const MAX_BATCH: usize = 1024;

/// After a transient failure, the next try comes after this much (or sooner, before the lease
/// would run out).
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// The handle a `Locker` keeps: started on the first renewing lease.
pub(crate) struct Renewer {
    lock: Arc<dyn Lock>,
    queue: OnceLock<mpsc::UnboundedSender<Arc<Held>>>,
}

impl Renewer {
    pub(crate) fn new(lock: Arc<dyn Lock>) -> Self {
        Self {
            lock,
            queue: OnceLock::new(),
        }
    }

    /// Starts renewing `held` a third of its TTL from now.
    ///
    /// Must be called within a tokio runtime (the task is spawned there on first use).
    pub(crate) fn watch(&self, held: Arc<Held>) {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(run(Arc::clone(&self.lock), rx));
            tx
        });
        if queue.send(held).is_err() {
            tracing::error!("the renewal task has stopped; the lease will not be renewed");
        }
    }
}

struct Due {
    at: Instant,
    seq: u64,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Schedule {
    heap: BinaryHeap<Reverse<Due>>,
    leases: std::collections::HashMap<u64, Arc<Held>>,
    next_seq: u64,
}

impl Schedule {
    fn push(&mut self, at: Instant, held: Arc<Held>) {
        self.next_seq += 1;
        self.heap.push(Reverse(Due {
            at,
            seq: self.next_seq,
        }));
        self.leases.insert(self.next_seq, held);
    }

    /// Every lease due by `by` that still renews (released and leaked ones are dropped here).
    fn take_due(&mut self, by: Instant) -> Vec<Arc<Held>> {
        let mut due = Vec::new();
        while due.len() < MAX_BATCH && self.heap.peek().is_some_and(|Reverse(d)| d.at <= by) {
            if let Some(Reverse(d)) = self.heap.pop()
                && let Some(held) = self.leases.remove(&d.seq)
                && held.is_renewing()
            {
                due.push(held);
            }
        }
        due
    }
}

fn period(held: &Held) -> Duration {
    held.renew_ttl / 3
}

async fn run(lock: Arc<dyn Lock>, mut queue: mpsc::UnboundedReceiver<Arc<Held>>) {
    let mut schedule = Schedule {
        heap: BinaryHeap::new(),
        leases: std::collections::HashMap::new(),
        next_seq: 0,
    };
    loop {
        let next = schedule.heap.peek().map(|Reverse(d)| d.at);
        tokio::select! {
            incoming = queue.recv() => match incoming {
                Some(held) => {
                    let at = Instant::now() + period(&held);
                    schedule.push(at, held);
                }
                // Every Locker and guard is gone; nothing can be renewing any more.
                None => return,
            },
            () = sleep_until_some(next) => {
                let due = schedule.take_due(Instant::now() + BATCH_WINDOW);
                for (held, next) in renew(lock.as_ref(), due).await {
                    schedule.push(next, held);
                }
            }
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Extends every lease in `due` in one batch; returns the ones to renew again, with when.
async fn renew(lock: &dyn Lock, due: Vec<Arc<Held>>) -> Vec<(Arc<Held>, Instant)> {
    // Hold each lease's op lock for the whole round trip: a release waits for it, so it can
    // never overtake a renewal. A lease whose lock is taken (its guard is extending or
    // releasing it right now) is looked at again shortly.
    let mut again = Vec::new();
    let mut batch = Vec::with_capacity(due.len());
    let now = Instant::now();
    for held in due {
        let Ok(op) = Arc::clone(&held).ops_owned() else {
            again.push((held, now + RETRY_AFTER));
            continue;
        };
        if !held.is_renewing() {
            continue;
        }
        let ttl = match held.hold_until {
            Some(cap) => held.renew_ttl.min(cap.saturating_duration_since(now)),
            None => held.renew_ttl,
        };
        if ttl < crate::MIN_TTL {
            // The cap on hold time is reached: let the lease run out; `lost()` fires then.
            held.stop_renewing();
            continue;
        }
        batch.push((held, op, ttl));
    }
    if batch.is_empty() {
        return again;
    }
    let requests: Vec<(Lease, Duration)> = batch
        .iter()
        .map(|(held, _, ttl)| (held.lease(), *ttl))
        .collect();
    let answers = lock.extend_many(&requests).await;
    let now = Instant::now();
    for ((held, op, _), answer) in batch.into_iter().zip(answers) {
        match answer {
            Ok(Some(valid_until)) => {
                held.labels
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "ok");
                held.set_valid_until(valid_until);
                again.push((Arc::clone(&held), now + period(&held)));
            }
            Ok(None) => {
                held.labels
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "not_owned");
                held.mark_lost();
            }
            Err(error) => {
                held.labels
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "error");
                held.labels
                    .count_with(metric::BACKEND_ERRORS_TOTAL, "op", "extend");
                retry_or_lose(&held, &error, now, &mut again);
            }
        }
        drop(op);
    }
    again
}

/// A transient failure is retried while the lease is still valid; otherwise the lease is lost.
fn retry_or_lose(
    held: &Arc<Held>,
    error: &LockError,
    now: Instant,
    again: &mut Vec<(Arc<Held>, Instant)>,
) {
    let left = held.valid_until().saturating_duration_since(now);
    if error.is_retryable() && !left.is_zero() {
        tracing::debug!(name = held.name(), %error, ?left, "renewal failed; retrying");
        again.push((Arc::clone(held), now + RETRY_AFTER.min(left / 2)));
    } else {
        tracing::warn!(name = held.name(), %error, "renewal failed for good");
        held.mark_lost();
    }
}
