//! The local waiting line: in one process, waiters for one name queue first-in first-out and
//! only the head contends in the backend, so a release wakes one waiter, not a herd, and a
//! holder that releases and asks again goes to the back of the line. (The seeds' in-process
//! CLH queue; baidu/dlock measured +74 % throughput from it.)
//!
//! A name has one line per lock kind (mutex, read, write, semaphore): readers do not queue
//! behind a local writer's line, nor a writer behind readers. Who goes first between readers
//! and writers is the backend's rule (writer preference), the same for every process; the
//! lines only keep waiters of one kind from contending as a herd. A release of the name wakes
//! the heads of all its lines.
//!
//! A guard released while its name has a line here hands the lock straight to the head
//! ([`Lock::hand_over`](crate::backend::Lock::hand_over)): one round trip, no announcement, no race
//! with the releaser. At most [`MAX_LOCAL_HANDOFFS`] times in a row, then one plain release,
//! so waiters in other processes get their chance.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::Lease;
use crate::backend::{Lock, ReleaseSignal, ReleaseWatch};
use crate::kind::Class;
use crate::runtime::cleanup::ReleaseOnDrop;
use crate::runtime::held::HeldLease;

/// How many times in a row a name is handed from one task of this process to the next before
/// a guard releases it plainly, announcing the release to every process. Without a bound, a
/// busy process would pass a lock among its own tasks for ever while other processes wait for
/// an announcement that never comes; with it, they get a turn at least every this many grants.
pub(crate) const MAX_LOCAL_HANDOFFS: u32 = 8;

#[derive(Default)]
pub(crate) struct Waiters {
    queues: Mutex<HashMap<Arc<str>, Waiting>>,
    /// How many names have a line (the map's length, stored under its lock): the uncontended
    /// cycle — nobody of this process waits for any name — asks this one atomic instead of
    /// taking the map's lock and hashing the name, three times per acquire and release.
    named: AtomicUsize,
}

/// The waiters of one kind for one name.
#[derive(Default)]
struct Queue {
    /// Tickets in arrival order, each with the TTL its waiter asks for and what wakes that
    /// waiter when it becomes the head. One wake-up per ticket, not one for the whole line: a
    /// line-wide `notify_waiters` woke every waiter at every change of head, each to find it
    /// was not the head, so emptying a line of n waiters cost O(n²) (issue 51's cost curves:
    /// 16 s of client CPU for 10,000 waiters).
    tickets: VecDeque<(u64, Duration, Arc<Notify>)>,
}

/// Everything this process keeps for one name that has waiters.
struct Waiting {
    /// One queue per [`Class`], indexed by it.
    queues: [Queue; 5],
    next_ticket: u64,
    /// Bumped when a guard of this process releases the name: the fast local handoff.
    local: ReleaseSignal,
    /// The backend's subscription to the name's releases, shared by everyone in line.
    remote: Option<Arc<ReleaseWatch>>,
    /// Set when a waiter of this process got the name exclusively (mutex or write): until a
    /// guard of this process releases it (or, should that never be announced, until the
    /// lease's validity), the heads it excludes wait instead of sending an attempt that cannot
    /// succeed.
    holder: Option<(Class, LocalHolder)>,
    /// A lease handed to the head of the mutex line by a releasing guard, not yet taken.
    /// Dropped untaken (the head gave up, the line emptied), it is released in the background.
    handed: Option<ReleaseOnDrop>,
    /// Handoffs since the last plain release of this name.
    handoffs_in_row: u32,
}

/// The guard of this process that holds a name its line waits for.
enum LocalHolder {
    /// A lease handed over and not yet taken: valid until this instant.
    Handed(Instant),
    /// A guard's lease: valid until its current `valid_until`, which renewal moves on. (A
    /// copy of the instant at the grant would make the next head try, in vain, as soon as the
    /// first lease would have ended.)
    Guard(Arc<HeldLease>),
}

impl LocalHolder {
    /// Until when the lease holds as far as this process knows; `None` once it is lost.
    fn until(&self) -> Option<Instant> {
        match self {
            Self::Handed(until) => Some(*until),
            Self::Guard(held) => (!held.is_lost()).then(|| held.valid_until()),
        }
    }
}

/// Whether a local holder of class `holder` keeps a waiter of class `waiter` out: a mutex or
/// a fair lock (the same lock, taken in turn) keeps both out, a writer keeps readers and
/// writers out.
fn excludes(holder: Class, waiter: Class) -> bool {
    match holder {
        Class::Mutex | Class::Fair => matches!(waiter, Class::Mutex | Class::Fair),
        Class::Write => matches!(waiter, Class::Read | Class::Write),
        Class::Read | Class::Semaphore => false,
    }
}

impl Waiting {
    fn new() -> Self {
        Self {
            queues: Default::default(),
            next_ticket: 0,
            local: ReleaseSignal::new(),
            remote: None,
            holder: None,
            handed: None,
            handoffs_in_row: 0,
        }
    }

    fn queue(&self, class: Class) -> &Queue {
        &self.queues[class as usize]
    }

    fn queue_mut(&mut self, class: Class) -> &mut Queue {
        &mut self.queues[class as usize]
    }

    /// The ticket at the head of `class`'s line.
    fn head(&self, class: Class) -> Option<u64> {
        self.queue(class).tickets.front().map(|(id, _, _)| *id)
    }

    fn is_empty(&self) -> bool {
        self.queues.iter().all(|line| line.tickets.is_empty())
    }
}

/// A place in a name's line; leaving it (drop) lets the next waiter in.
pub(crate) struct Ticket {
    waiters: Arc<Waiters>,
    name: Arc<str>,
    class: Class,
    id: u64,
    turn: Arc<Notify>,
    local: ReleaseSignal,
}

/// What the head watches while it waits.
pub(crate) struct Signals {
    pub(crate) local: ReleaseSignal,
    pub(crate) remote: Option<Arc<ReleaseWatch>>,
    /// The name is held by a guard of this process that excludes this waiter, until this
    /// instant at the latest.
    pub(crate) held_until: Option<Instant>,
}

impl Waiters {
    fn queues(&self) -> MutexGuard<'_, HashMap<Arc<str>, Waiting>> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Joins the back of `name`'s line for `class`, asking for `ttl` when the lock is handed
    /// over.
    pub(crate) fn join(self: &Arc<Self>, name: &Arc<str>, class: Class, ttl: Duration) -> Ticket {
        let mut queues = self.queues();
        let queue = queues.entry(Arc::clone(name)).or_insert_with(Waiting::new);
        queue.next_ticket += 1;
        let id = queue.next_ticket;
        let local = queue.local.clone();
        let turn = Arc::new(Notify::new());
        queue
            .queue_mut(class)
            .tickets
            .push_back((id, ttl, Arc::clone(&turn)));
        self.named.store(queues.len(), Ordering::SeqCst);
        Ticket {
            waiters: Arc::clone(self),
            name: Arc::clone(name),
            class,
            id,
            turn,
            local,
        }
    }

    /// Whether no name has a line here: nobody of this process waits. Read without the map's
    /// lock; a waiter that joins after this answer sends its own attempt to the backend after
    /// joining, so it sees whatever the caller did before asking.
    fn nobody_waits(&self) -> bool {
        self.named.load(Ordering::SeqCst) == 0
    }

    /// Whether anyone in this process waits for `name` in `class`'s line.
    pub(crate) fn has_waiters(&self, name: &str, class: Class) -> bool {
        if self.nobody_waits() {
            return false;
        }
        self.queues()
            .get(name)
            .is_some_and(|q| !q.queue(class).tickets.is_empty())
    }

    /// A guard of this process released `name` (or tried to): wake the heads of its lines.
    pub(crate) fn released(&self, name: &str) {
        if self.nobody_waits() {
            return;
        }
        if let Some(queue) = self.queues().get_mut(name) {
            queue.holder = None;
            queue.handoffs_in_row = 0;
            queue.local.notify();
        }
    }

    /// The TTL to hand the mutex `name` over for, when a guard of this process releases it:
    /// the head's, if someone waits and the name has not been handed on
    /// [`MAX_LOCAL_HANDOFFS`] times in a row; `None` when the guard should release it plainly.
    pub(crate) fn successor(&self, name: &str) -> Option<Duration> {
        if self.nobody_waits() {
            return None;
        }
        let queues = self.queues();
        let queue = queues.get(name)?;
        if queue.handoffs_in_row >= MAX_LOCAL_HANDOFFS || queue.handed.is_some() {
            return None;
        }
        queue
            .queue(Class::Mutex)
            .tickets
            .front()
            .map(|(_, ttl, _)| *ttl)
    }

    /// A releasing guard handed the mutex `name` over: `lease` is the head's to take. With
    /// nobody left in line, the lease is released in the background.
    pub(crate) fn hand(&self, lock: Arc<dyn Lock>, lease: Lease) {
        let pending = ReleaseOnDrop::new(lock, lease.clone());
        let mut queues = self.queues();
        let Some(queue) = queues.get_mut(lease.name()) else {
            return; // `pending` is dropped after the lock is let go: released in the background
        };
        queue.handoffs_in_row = queue.handoffs_in_row.saturating_add(1);
        queue.holder = Some((Class::Mutex, LocalHolder::Handed(lease.valid_until())));
        let replaced = queue.handed.replace(pending);
        queue.local.notify();
        drop(queues);
        drop(replaced);
    }
}

impl Ticket {
    /// Whether this ticket is at the head of its line (the one that contends).
    pub(crate) fn is_head(&self) -> bool {
        self.waiters
            .queues()
            .get(&self.name)
            .is_some_and(|q| q.head(self.class) == Some(self.id))
    }

    /// The lease a releasing guard handed to this ticket, if it is the head of the mutex line
    /// and one is waiting and still valid. (An expired one is dropped, which releases it in the
    /// background.)
    pub(crate) fn take_handed(&self) -> Option<Lease> {
        if self.class != Class::Mutex {
            return None;
        }
        let mut queues = self.waiters.queues();
        let queue = queues.get_mut(&self.name)?;
        if queue.head(self.class) != Some(self.id) {
            return None;
        }
        let handed = queue.handed.take()?;
        drop(queues);
        let lease = handed.lease().clone();
        if lease.valid_until() <= Instant::now() {
            return None; // dropping `handed` releases it
        }
        handed.disarm();
        Some(lease)
    }

    /// Resolves when this ticket reaches the head of the line. Woken only then (its own
    /// `Notify`, which keeps a wake-up that comes before the wait), not at every change of head.
    pub(crate) async fn my_turn(&self) {
        loop {
            let turn = self.turn.notified();
            tokio::pin!(turn);
            turn.as_mut().enable();
            if self.is_head() {
                return;
            }
            turn.await;
        }
    }

    /// The signals the head waits on, read together under the line's lock.
    pub(crate) fn signals(&self) -> Signals {
        let queues = self.waiters.queues();
        let queue = queues.get(&self.name);
        Signals {
            local: self.local.clone(),
            remote: queue.and_then(|q| q.remote.clone()),
            held_until: queue
                .and_then(|q| q.holder.as_ref())
                .filter(|(class, _)| excludes(*class, self.class))
                .and_then(|(_, holder)| holder.until()),
        }
    }

    /// This waiter got the name, held by `held`. An exclusive grant (mutex, write) makes the
    /// waiters it excludes wait for its release (or the end of its lease, however often renewal
    /// moves it) instead of trying; a shared one (read, permits) changes nothing.
    pub(crate) fn granted(&self, held: &Arc<HeldLease>) {
        if !held.kind().is_exclusive() {
            return;
        }
        if let Some(queue) = self.waiters.queues().get_mut(&self.name) {
            queue.holder = Some((self.class, LocalHolder::Guard(Arc::clone(held))));
        }
    }

    /// The local holder's validity came: if it has passed (it was not renewed) or the lease
    /// was lost, without a release being announced, stop waiting for it and let the head try.
    pub(crate) fn granted_expired(&self) {
        if let Some(queue) = self.waiters.queues().get_mut(&self.name) {
            let until = queue.holder.as_ref().and_then(|(_, holder)| holder.until());
            if until.is_none_or(|until| until <= Instant::now()) {
                queue.holder = None;
            }
        }
    }

    /// Keeps the backend's subscription for everyone in this name's lines (until they empty).
    pub(crate) fn share_watch(&self, watch: ReleaseWatch) -> Arc<ReleaseWatch> {
        let watch = Arc::new(watch);
        if let Some(queue) = self.waiters.queues().get_mut(&self.name) {
            queue.remote = Some(Arc::clone(&watch));
        }
        watch
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut queues = self.waiters.queues();
        let Some(queue) = queues.get_mut(&self.name) else {
            return;
        };
        let was_head = queue.head(self.class) == Some(self.id);
        let tickets = &mut queue.queue_mut(self.class).tickets;
        if was_head {
            tickets.pop_front();
        } else {
            tickets.retain(|(id, _, _)| *id != self.id);
        }
        if queue.is_empty() {
            // The last waiter left: drop the lines and with them the backend subscription (and
            // release a lease handed over but never taken).
            let queue = queues.remove(&self.name);
            self.waiters.named.store(queues.len(), Ordering::SeqCst);
            drop(queues);
            drop(queue);
        } else if was_head {
            // A lease handed to this head and not taken is released, not passed to the next
            // waiter, who asked for a TTL of its own; the next head then contends as usual.
            let untaken = if self.class == Class::Mutex {
                queue.handed.take()
            } else {
                None
            };
            if untaken.is_some() {
                queue.holder = None;
                queue.local.notify();
            }
            // The new head alone is woken.
            if let Some((_, _, next)) = queue.queue(self.class).tickets.front() {
                next.notify_one();
            }
            drop(queues);
            drop(untaken);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicU64;
    use std::task::{Context, Poll};

    use super::*;

    /// Counts the polls of the future it wraps.
    struct Counted<F> {
        polls: Arc<AtomicU64>,
        inner: Pin<Box<F>>,
    }

    impl<F: Future> Future for Counted<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.inner.as_mut().poll(cx)
        }
    }

    /// A line of n waiters emptied head by head, each head holding for a moment (as a grant's
    /// round trip does), wakes each waiter about once: the waiters' polls grow as n, not n² (a
    /// line-wide wake-up polled every sleeping waiter at every change of head: ~n²/2 polls,
    /// 500,000 for these 1,000). The clock is paused: the holds take no real time.
    #[tokio::test(start_paused = true)]
    async fn a_line_emptied_head_by_head_wakes_each_waiter_about_once() {
        const N: u64 = 1_000;
        let waiters = Arc::new(Waiters::default());
        let name: Arc<str> = Arc::from("job");
        let polls = Arc::new(AtomicU64::new(0));
        let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
        let mut first = Some(waiters.join(&name, Class::Mutex, Duration::from_secs(1)));
        for _ in 1..N {
            let ticket = waiters.join(&name, Class::Mutex, Duration::from_secs(1));
            let done_tx = done_tx.clone();
            let wait = Counted {
                polls: Arc::clone(&polls),
                inner: Box::pin(async move {
                    ticket.my_turn().await;
                    ticket
                }),
            };
            tokio::spawn(async move {
                let ticket = wait.await;
                // At the head: hold a moment, then leave the line, letting the next one in.
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(ticket);
                let _ = done_tx.send(());
            });
        }
        drop(done_tx);
        // Every waiter has polled once and waits.
        tokio::task::yield_now().await;
        drop(first.take());
        let mut finished = 0;
        while tokio::time::timeout(Duration::from_secs(30), done.recv())
            .await
            .expect("the line empties")
            .is_some()
        {
            finished += 1;
        }
        assert_eq!(finished, N - 1, "every waiter got its turn");
        let polls = polls.load(Ordering::Relaxed);
        assert!(
            polls <= 3 * N,
            "{polls} polls for {N} waiters: woken far more than once each"
        );
    }
}
