//! The watchdog: one task per `Locker` and tokio runtime that keeps every renewing lease alive.
//!
//! One task and a min-heap of due times, not a task per guard, so 10,000 held locks cost one
//! timer. All leases due at one moment are extended together through `Lock::extend_many`. A new
//! lease wakes the task only if it is due before the task's armed timer.
//!
//! The task runs on the runtime that granted the lease, never on "the first runtime that used
//! the `Locker`": that runtime may be gone (every `#[tokio::test]` has its own, and so do services
//! that build a runtime per component), and a task on a dropped runtime never runs again. So a
//! `Locker` keeps one watchdog per live runtime (a [`PerRuntime`]). When a runtime shuts down,
//! its watchdog's task is dropped; it hands its leases back, and the next grant on another
//! runtime adopts them.
//!
//! The same task keeps `distlock_oldest_held_seconds` (see `runtime::oldest`): once a second
//! while its runtime's guards hold anything, it reports the oldest hold per series. A stuck
//! holder must show whether its lease is renewed or not, so a lease with a fixed TTL is handed
//! to the watchdog too — only watched, never extended. That costs its grant what a renewed
//! lease's grant pays already (the watchdog's look-up and its inbox's lock, both uncontended),
//! and no wake-up: while anything is watched, the task's timer is at most a second away and
//! it takes the lease in then. The cheaper alternatives miss holds: the reentrancy map sees
//! only mutex and read-write guards taken inside a task, and counters (`distlock_held`) say
//! how many, not since when.
//!
//! The same look asks the backend to watch each lease's key for loss (`Lock::watch_loss`),
//! for the leases still held when it takes them in: asking at the grant cost every cycle a
//! registration and its teardown (~1,000 client instructions, 3 % of an uncontended Redis
//! cycle; `scripts/client-cost.sh`), and the holds short enough to end before the look are
//! the ones a loss watch could not help.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::backend::PerRuntime;

use crate::backend::Lock;
use crate::metric;
use crate::runtime::held::HeldLease;
use crate::runtime::oldest::{REPORT_EVERY, Reporter};
use crate::{Lease, LockError};

/// Leases due within this much of the earliest are renewed in the same batch.
const BATCH_WINDOW: Duration = Duration::from_millis(50);

/// The most leases sent in one `extend_many` call.
const MAX_BATCH: usize = 1024;

/// After a transient failure, the next try comes after this much (or sooner, before the lease
/// would run out).
const RETRY_AFTER: Duration = Duration::from_millis(200);

/// The shortest wait between two tries of a failing renewal, near the stop point.
const MIN_RETRY: Duration = Duration::from_millis(10);

/// The inbox is swept of released leases whenever it reaches this many, or twice what the
/// last sweep kept, whichever is more.
const SWEEP_FROM: usize = 64;

/// The handle a `Locker` keeps: the watchdogs it started, one per runtime.
pub(crate) struct Renewer {
    lock: Arc<dyn Lock>,
    dogs: PerRuntime<Dog>,
    /// The leases of watchdogs whose runtime is gone, until a grant adopts them.
    orphans: Arc<Orphans>,
}

/// One runtime's watchdog: what it shares with the `Locker`. Its task tells the `PerRuntime`
/// that holds it whether its runtime is still there.
struct Dog {
    shared: Arc<Shared>,
    orphans: Arc<Orphans>,
}

/// Leases whose watchdog went with its runtime, for the next grant, on any runtime, to hand to
/// its own watchdog.
#[derive(Default)]
struct Orphans {
    leases: Mutex<Vec<(Instant, Arc<HeldLease>)>>,
    /// Whether `leases` may hold any: read on every grant, so that grants pay one load, not a
    /// lock, while there are none.
    any: AtomicBool,
}

/// What a `Locker` and one watchdog task share. New leases go into `inbox`; the task is woken
/// only when it must look sooner than it already will (no timer armed, or the new lease is due
/// before the armed one), so a grant costs no wake-up of another task in the common case.
struct Shared {
    state: Mutex<Inbox>,
    wake: Notify,
}

#[derive(Default)]
struct Inbox {
    /// New leases with the instant each is first due (a third of its TTL after it was granted;
    /// for a lease that is only watched, a report period after), and, once the task is gone
    /// with its runtime, every lease it still watched.
    new: Vec<(Instant, Arc<HeldLease>)>,
    /// When the task's timer fires next; `None` while it waits without one.
    armed: Option<Instant>,
    /// The length at which `new` is next swept of released leases (see [`Inbox::push`]).
    sweep_at: usize,
    /// The `Locker` is gone: the task ends.
    closed: bool,
}

impl Renewer {
    pub(crate) fn new(lock: Arc<dyn Lock>) -> Self {
        Self {
            lock,
            dogs: PerRuntime::with_retire(Dog::retire),
            orphans: Arc::default(),
        }
    }

    /// Hands `held`, granted at `now`, to the current runtime's watchdog: it renews it a
    /// third of its TTL after that if it renews, and counts it in the oldest-hold gauge until
    /// its guard ends, renewed or not.
    ///
    /// A renewing lease must be tracked within a tokio runtime (the watchdog is spawned there
    /// on first use); one with a fixed TTL tracked outside any is left unwatched.
    pub(crate) fn track(&self, held: Arc<HeldLease>, now: Instant) {
        // Queued under the lock of the list, without a clone of the watchdog's shared state.
        let start = |runtime: &Handle| self.start_watchdog(runtime);
        let queue = |dog: &Dog, due, held| {
            dog.shared.queue(due, held);
            if self.orphans.any.load(Ordering::Acquire) {
                dog.shared.adopt(self.orphans.take());
            }
        };
        if held.is_renewing() {
            let due = now + held.renew_period();
            self.dogs.get_or_start(start, |dog| queue(dog, due, held));
        } else {
            // Due when the task looks next anyway (it looks every `REPORT_EVERY` while it
            // watches anything): no wake-up, unless it watches nothing yet.
            let due = now + REPORT_EVERY;
            self.dogs
                .try_get_or_start(start, |dog| queue(dog, due, held));
        }
    }

    /// Starts the watchdog of `runtime`, which has none running; it starts with the leases of
    /// watchdogs whose runtime is gone, due at once.
    fn start_watchdog(&self, runtime: &Handle) -> (Dog, JoinHandle<()>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(Inbox {
                new: self.orphans.take(),
                ..Inbox::default()
            }),
            wake: Notify::new(),
        });
        let task = runtime.spawn(run(Arc::clone(&self.lock), Arc::clone(&shared)));
        let dog = Dog {
            shared,
            orphans: Arc::clone(&self.orphans),
        };
        (dog, task)
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.dogs.for_each(|dog| {
            dog.shared.lock().closed = true;
            dog.shared.wake.notify_one();
        });
    }
}

impl Dog {
    /// The watchdog's runtime is gone, and its task with it: the task's state, dropped, put
    /// every lease it still renewed in the inbox; they become orphans.
    fn retire(self) {
        let leases = std::mem::take(&mut self.shared.lock().new);
        if !leases.is_empty() {
            self.orphans.leases().extend(leases);
            self.orphans.any.store(true, Ordering::Release);
        }
    }
}

impl Orphans {
    fn leases(&self) -> std::sync::MutexGuard<'_, Vec<(Instant, Arc<HeldLease>)>> {
        self.leases.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes every orphan.
    fn take(&self) -> Vec<(Instant, Arc<HeldLease>)> {
        let mut leases = self.leases();
        self.any.store(false, Ordering::Release);
        std::mem::take(&mut *leases)
    }
}

impl Inbox {
    /// Adds a new lease. The task takes the inbox in only when its timer fires or a lease is
    /// due sooner, a third of a lease after the last time, so short holds would pile up here
    /// (a busy process: hundreds of thousands of released leases, each kept allocated, for
    /// ten seconds at the default lease); each sweep drops the released ones, so the inbox
    /// stays within about twice the leases still held, at an amortised constant cost per grant.
    fn push(&mut self, due: Instant, held: Arc<HeldLease>) {
        self.new.push((due, held));
        sweep_if_due(&mut self.new, &mut self.sweep_at, |(_, held)| {
            !held.has_ended()
        });
    }
}

impl Shared {
    /// Queues `held`, due at `due`, and wakes the task if it must look sooner than its timer.
    fn queue(&self, due: Instant, held: Arc<HeldLease>) {
        let wake = {
            let mut inbox = self.lock();
            inbox.push(due, held);
            inbox.armed.is_none_or(|armed| due < armed)
        };
        if wake {
            self.wake.notify_one();
        }
    }

    /// Takes in orphans of another watchdog, and wakes the task to look at them.
    fn adopt(&self, orphans: Vec<(Instant, Arc<HeldLease>)>) {
        if orphans.is_empty() {
            return;
        }
        self.lock().new.extend(orphans);
        self.wake.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inbox> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Drops from `leases` those `live` says are over, once they have reached `sweep_at` (at least
/// [`SWEEP_FROM`]), and sets the next sweep at twice what was kept: an amortised constant cost
/// per lease, and never more than about twice the live ones kept.
fn sweep_if_due<T>(leases: &mut Vec<T>, sweep_at: &mut usize, live: impl FnMut(&T) -> bool) {
    if leases.len() >= (*sweep_at).max(SWEEP_FROM) {
        leases.retain(live);
        *sweep_at = leases.len() * 2;
    }
}

/// Every lease handed to one watchdog whose guard has not ended: renewed or with a fixed TTL,
/// lost or not. What the oldest-hold gauge is computed from.
#[derive(Default)]
struct Watched {
    leases: Vec<Arc<HeldLease>>,
    sweep_at: usize,
}

impl Watched {
    fn push(&mut self, held: Arc<HeldLease>) {
        self.leases.push(held);
        // Between reports, short holds would pile up here as they do in the inbox.
        sweep_if_due(&mut self.leases, &mut self.sweep_at, |held| {
            !held.has_ended()
        });
    }
}

/// One renewal due: when, the order it was queued in (the tie-break), and the lease itself,
/// kept in the heap entry: a side map from sequence number to lease cost every renewal an
/// insert and a removal (~10 % of the watchdog's CPU at 100,000 held locks; `perf record` of
/// the load tool's C1 child).
struct Due {
    at: Instant,
    seq: u64,
    held: Arc<HeldLease>,
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

#[derive(Default)]
struct Schedule {
    heap: BinaryHeap<Reverse<Due>>,
    next_seq: u64,
}

impl Schedule {
    fn push(&mut self, at: Instant, held: Arc<HeldLease>) {
        self.next_seq += 1;
        self.heap.push(Reverse(Due {
            at,
            seq: self.next_seq,
            held,
        }));
    }

    /// Every lease due by `by` that still renews (released and leaked ones are dropped here).
    fn take_due(&mut self, by: Instant) -> Vec<Arc<HeldLease>> {
        let mut due = Vec::new();
        while due.len() < MAX_BATCH && self.heap.peek().is_some_and(|Reverse(d)| d.at <= by) {
            if let Some(Reverse(d)) = self.heap.pop()
                && d.held.is_renewing()
            {
                due.push(d.held);
            }
        }
        due
    }
}

/// The state of one watchdog task. Dropped with the task — also when its runtime shuts down
/// mid-renewal — it hands every lease it still watches (which includes every one it renews)
/// back to the inbox, for the watchdog of another runtime to adopt, and takes its holds out of
/// the oldest-hold gauge (the adopter reports them again).
struct Watchdog {
    shared: Arc<Shared>,
    schedule: Schedule,
    /// Also holds the batch being extended right now, which has left `schedule`.
    watched: Watched,
    reporter: Reporter,
    /// When the next report of the oldest holds is due; `None` while nothing is watched and
    /// the last report set every series of this watchdog back to 0.
    next_report: Option<Instant>,
}

impl Watchdog {
    /// Reports the oldest hold per series at `now`, after dropping the holds that ended.
    ///
    /// One pass over the watched leases, skipping the ended ones: a sweep of them here as well
    /// read every lease twice a second (at 100,000 held locks, a tenth of the watchdog's CPU
    /// between the two; `perf record` of the load tool's C1 child). Ended leases are swept as
    /// new ones come in (`Watched::push`), and all at once when none is left.
    fn report(&mut self, now: Instant) {
        let mut live = 0usize;
        let leases = self.watched.leases.iter().filter(|held| {
            let held_now = !held.has_ended();
            live += usize::from(held_now);
            held_now
        });
        self.reporter.report(leases.map(|held| &**held), now);
        if live == 0 {
            self.watched.leases.clear();
            self.watched.sweep_at = 0;
        }
        self.next_report = (live > 0).then(|| now + REPORT_EVERY);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let now = Instant::now();
        let orphans: Vec<_> = self
            .watched
            .leases
            .drain(..)
            .filter(|held| !held.has_ended())
            .map(|held| (now, held))
            .collect();
        self.shared.lock().new.extend(orphans);
    }
}

async fn run(lock: Arc<dyn Lock>, shared: Arc<Shared>) {
    let mut dog = Watchdog {
        shared,
        schedule: Schedule::default(),
        watched: Watched::default(),
        reporter: Reporter::new(),
        next_report: None,
    };
    loop {
        // Take in new leases and publish when we will look next, under one lock, so a lease
        // added right after sees the timer it can rely on (or wakes us).
        let mut still_held = Vec::new();
        let next = {
            let mut inbox = dog.shared.lock();
            if inbox.closed {
                return;
            }
            for (at, held) in inbox.new.drain(..) {
                // Leases with a fixed TTL (and lost ones handed back) are only watched.
                if held.is_renewing() {
                    dog.schedule.push(at, Arc::clone(&held));
                }
                if !held.has_ended() {
                    still_held.push(Arc::clone(&held));
                }
                dog.watched.push(held);
            }
            if dog.next_report.is_none() && !dog.watched.leases.is_empty() {
                dog.next_report = Some(Instant::now() + REPORT_EVERY);
            }
            let due = dog.schedule.heap.peek().map(|Reverse(d)| d.at);
            let next = match (due, dog.next_report) {
                (Some(due), Some(report)) => Some(due.min(report)),
                (due, report) => due.or(report),
            };
            inbox.armed = next;
            next
        };
        // The holds that outlived their stay in the inbox (up to a second) have their keys
        // watched for loss: outside the inbox's lock, which every grant takes.
        for held in still_held {
            held.watch_loss(lock.as_ref());
        }
        let shared = Arc::clone(&dog.shared);
        tokio::select! {
            () = shared.wake.notified() => {}
            () = sleep_until_some(next) => {
                let now = Instant::now();
                if dog.next_report.is_some_and(|at| at <= now) {
                    dog.report(now);
                }
                let due = dog.schedule.take_due(now + BATCH_WINDOW);
                if due.is_empty() {
                    continue;
                }
                let again = renew(&lock, due).await;
                for (held, next) in again {
                    dog.schedule.push(next, held);
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
async fn renew(lock: &Arc<dyn Lock>, due: Vec<Arc<HeldLease>>) -> Vec<(Arc<HeldLease>, Instant)> {
    // Hold each lease's op lock for the whole round trip: a release waits for it, so it can
    // never overtake a renewal. A lease whose lock is taken (its guard is extending or
    // releasing it right now) is looked at again shortly.
    let mut again = Vec::new();
    let mut batch = Vec::with_capacity(due.len());
    let now = Instant::now();
    for held in due {
        let Some(op) = Arc::clone(&held).ops_owned() else {
            again.push((held, now + RETRY_AFTER));
            continue;
        };
        if !held.is_renewing() {
            continue;
        }
        let ttl = held.renew_ttl_at(now);
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
        .map(|(held, _, ttl)| (held.lease(), held.store_ttl(*ttl)))
        .collect();
    let answers = lock.as_ref().extend_many(&requests).await;
    let now = Instant::now();
    for ((held, op, _), answer) in batch.into_iter().zip(answers) {
        match answer {
            Ok(Some(valid_until)) => {
                held.labels()
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "ok");
                held.renewed(valid_until);
                super::revocation::look_for_revocation(lock, &held);
                again.push((Arc::clone(&held), now + held.next_renewal_in(now)));
            }
            Ok(None) => {
                held.labels()
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "not_owned");
                held.mark_lost();
            }
            Err(error) => {
                held.labels()
                    .count_with(metric::RENEWALS_TOTAL, "outcome", "error");
                held.labels()
                    .count_with(metric::BACKEND_ERRORS_TOTAL, "op", "extend");
                retry_or_lose(&held, &error, now, &mut again);
            }
        }
        drop(op);
    }
    again
}

/// A transient failure is retried until the lease's stop point (`valid_until` − its stop
/// margin): the lease is *at risk* meanwhile. At the stop point, or at once for an error that
/// is not retryable, the lease is lost, while it is still valid for the stop margin.
fn retry_or_lose(
    held: &Arc<HeldLease>,
    error: &LockError,
    now: Instant,
    again: &mut Vec<(Arc<HeldLease>, Instant)>,
) {
    let stop_at = held.stop_at();
    if error.is_retryable() && now < stop_at {
        held.mark_at_risk();
        let left = stop_at - now;
        tracing::debug!(name = held.name(), %error, ?left, "renewal failed; retrying");
        // Tries halve the time left, so one lands before the stop point however short the
        // lease; when too little is left, the last lands on the stop point itself, where the
        // lease is given up if it fails.
        let delay = RETRY_AFTER.min(left / 2);
        let next = if delay < MIN_RETRY {
            stop_at
        } else {
            now + delay
        };
        again.push((Arc::clone(held), next));
    } else if error.is_retryable() {
        tracing::warn!(name = held.name(), %error, "renewal failed up to the stop point; the work is told to stop");
        held.reach_stop_point();
    } else {
        tracing::warn!(name = held.name(), %error, "renewal failed for good");
        held.mark_lost();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Labels;
    use crate::{MemoryLock, Token};

    /// A lease renewed, or with a fixed TTL (only watched).
    fn lease(i: usize, labels: &Labels, renewed: bool) -> Arc<HeldLease> {
        let token = Token::generate().expect("the OS random source");
        let lease = Lease::new(format!("n{i}").as_str(), token, 0, Instant::now());
        let ttl = Duration::from_secs(30);
        Arc::new(HeldLease::new(
            &lease,
            labels.clone(),
            renewed.then_some(ttl),
            None,
            ttl / 5,
            Instant::now(),
        ))
    }

    /// A process that takes and releases locks quickly, all within the first third of their
    /// lease, must not keep its released leases queued for the watchdog (they were kept until
    /// the watchdog's timer fired, ten seconds at the default lease: hundreds of thousands
    /// under load). The leases still held stay queued.
    #[tokio::test(flavor = "current_thread")]
    async fn released_leases_do_not_pile_up_for_the_watchdog() {
        pile_up(true);
    }

    /// The same for leases with a fixed TTL, which the watchdog only watches (for the
    /// oldest-hold gauge): a process of short fixed-TTL holds keeps no more of them queued.
    #[tokio::test(flavor = "current_thread")]
    async fn released_fixed_ttl_leases_do_not_pile_up_for_the_watchdog() {
        pile_up(false);
    }

    fn pile_up(renewed: bool) {
        let renewer = Renewer::new(Arc::new(MemoryLock::new()));
        let labels = Labels::new(
            "memory",
            "mutex",
            None,
            Labels::unlabelled_set("memory", "mutex"),
        );
        // The watchdog task never runs meanwhile (nothing here awaits): only the sweep empties
        // its inbox.
        let held: Vec<_> = (0..100).map(|i| lease(i, &labels, renewed)).collect();
        for lease in &held {
            renewer.track(Arc::clone(lease), Instant::now());
        }
        for i in 0..10_000 {
            let released = lease(100 + i, &labels, renewed);
            renewer.track(Arc::clone(&released), Instant::now());
            released.end();
        }
        let mut queued = Vec::new();
        renewer.dogs.for_each(|dog| {
            let inbox = dog.shared.lock();
            queued.extend(inbox.new.iter().map(|(_, held)| Arc::clone(held)));
        });
        assert!(
            queued.len() < 100 + 2 * SWEEP_FROM,
            "{} leases queued for 100 held",
            queued.len()
        );
        for lease in &held {
            assert!(
                queued.iter().any(|q| Arc::ptr_eq(q, lease)),
                "a lease still held left the queue"
            );
        }
    }
}
