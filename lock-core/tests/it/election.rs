//! Leader election on MemoryLock (and on the controllable backend, whose renewals fail): one
//! leader at a time, growing terms, resign hands over, observers see each term once and in
//! order, the stop margin, resume. Tokio's paused clock makes every duration exact.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use lock_core::backend::{Attempt, Capabilities, Fencing, Lock};
use lock_core::{Lease, LockError, Locker, MemoryLock, TermEnd, TermEvent, Token};
use tokio::time::{Instant, sleep, timeout};

use crate::common::{Remote, SLOW_NOTE, is_free, probe_locker};

const LEASE: Duration = Duration::from_secs(2);

fn lockers(n: usize) -> (Arc<MemoryLock>, Vec<Locker>) {
    let store = Arc::new(MemoryLock::new());
    let lockers = (0..n)
        .map(|_| Locker::builder(Arc::clone(&store)).lease(LEASE).build())
        .collect();
    (store, lockers)
}

#[tokio::test(start_paused = true)]
async fn one_leader_with_its_value_and_resign_hands_over_to_a_larger_term() {
    let (_, lockers) = lockers(2);
    let a = lockers[0].elect("scheduler").value("pod-a");
    let b = lockers[1].elect("scheduler").value(b"pod-b");
    assert!(
        a.leader().await.expect("reads").is_none(),
        "nobody leads yet"
    );
    let before = SystemTime::now();
    let first = a.campaign().await.expect("elected");
    assert_eq!(first.value(), b"pod-a");
    assert!(
        b.try_campaign().await.expect("answers").is_none(),
        "one leader at a time"
    );
    let seen = b.leader().await.expect("reads").expect("a leads");
    assert_eq!(seen.term(), first.term());
    assert_eq!(seen.value_str(), Some("pod-a"));
    assert!(seen.since().expect("recorded") >= before - Duration::from_secs(1));
    let waiting = tokio::spawn(async move { b.campaign().await });
    sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "b waits while a leads");
    let first_term = first.term();
    first.resign().await.expect("still ours");
    let second = timeout(Duration::from_secs(5), waiting)
        .await
        .expect("b elected after a resigned")
        .expect("task")
        .expect("elected");
    assert!(second.term() > first_term, "terms grow");
    let seen = a.leader().await.expect("reads").expect("b leads");
    assert_eq!((seen.term(), seen.value()), (second.term(), &b"pod-b"[..]));
    drop(second); // resigns in the background
    sleep(Duration::from_millis(10)).await;
    assert!(a.leader().await.expect("reads").is_none());
}

#[tokio::test(start_paused = true)]
async fn observe_tells_each_term_once_in_order_and_none_between() {
    let (_, lockers) = lockers(2);
    let election = lockers[0]
        .elect("scheduler")
        .poll_interval(Duration::from_millis(50));
    let mut changes = Box::pin(lockers[1].elect("scheduler").observe());
    assert_eq!(changes.next().await.expect("item").expect("reads"), None);
    let mut terms = Vec::new();
    for i in 0..5 {
        let leadership = election
            .clone()
            .value(format!("round {i}"))
            .campaign()
            .await
            .expect("elected");
        let seen = changes
            .next()
            .await
            .expect("item")
            .expect("reads")
            .expect("a leader");
        assert_eq!(seen.term(), leadership.term());
        assert_eq!(seen.value_str(), Some(format!("round {i}").as_str()));
        terms.push(seen.term());
        sleep(Duration::from_millis(300)).await; // several polls: no duplicate told
        leadership.resign().await.expect("ours");
        assert_eq!(changes.next().await.expect("item").expect("reads"), None);
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "in order: {terms:?}");
    assert!(
        changes.next().now_or_never().is_none(),
        "nothing more to tell while nobody leads"
    );
}

#[tokio::test(start_paused = true)]
async fn a_crashed_leader_is_replaced_after_its_lease() {
    let (_, lockers) = lockers(2);
    let a = lockers[0].elect("scheduler");
    let kept = a.campaign().await.expect("elected").leak(); // "crashes": no renewal, no release
    let started = Instant::now();
    let next = lockers[1]
        .elect("scheduler")
        .campaign()
        .await
        .expect("elected");
    assert!(started.elapsed() <= LEASE + Duration::from_millis(100));
    assert!(next.term() > kept.fencing_token());
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_renewals_fail_is_told_to_stop_before_its_lease_ends() {
    let (probe, locker) = probe_locker(LEASE);
    let leadership = locker
        .elect("scheduler")
        .stop_margin(Duration::from_millis(500))
        .campaign()
        .await
        .expect("elected");
    probe.failing.store(true, Ordering::SeqCst);
    leadership.at_risk().await;
    assert!(leadership.is_leader(), "at risk, still leading");
    leadership.lost().await;
    let left = leadership
        .valid_until()
        .saturating_duration_since(Instant::now());
    assert!(
        left >= Duration::from_millis(400),
        "lost only {left:?} before the end"
    );
    assert!(!leadership.is_leader());
}

#[tokio::test(start_paused = true)]
async fn run_reports_terms_cancels_lost_work_and_stops() {
    let (probe, locker) = probe_locker(LEASE);
    let (ran_tx, mut ran) = tokio::sync::mpsc::unbounded_channel();
    let mut run = locker.elect("scheduler").run(move |watch| {
        let ran_tx = ran_tx.clone();
        async move {
            let _ = ran_tx.send(watch.fencing_token());
            // Never returns: only loss or stop ends it.
            std::future::pending::<()>().await;
        }
    });
    let Some(TermEvent::Started { term }) = run.next_event().await else {
        panic!("a term started");
    };
    assert_eq!(ran.recv().await, Some(term), "the work got the term");
    probe.failing.store(true, Ordering::SeqCst);
    assert_eq!(
        run.next_event().await,
        Some(TermEvent::Ended {
            term,
            end: TermEnd::Lost
        })
    );
    probe.failing.store(false, Ordering::SeqCst);
    let Some(TermEvent::Started { term: next }) = run.next_event().await else {
        panic!("campaigned again");
    };
    assert!(next > term);
    run.stop().await;
    assert_eq!(
        run.next_event().await,
        Some(TermEvent::Ended {
            term: next,
            end: TermEnd::Stopped
        })
    );
    assert_eq!(run.next_event().await, None);
    assert!(run.is_finished());
    assert!(
        locker
            .lock("scheduler")
            .try_acquire()
            .await
            .expect("answers")
            .is_some(),
        "resigned"
    );
}

#[tokio::test(start_paused = true)]
async fn resume_takes_a_kept_leadership_back_once_with_a_new_term() {
    let (_, lockers) = lockers(2);
    let election = lockers[0].elect("scheduler").value("pod-a");
    let text = election
        .campaign()
        .await
        .expect("elected")
        .leak()
        .to_string();
    let restarted = lockers[1].elect("scheduler").value("pod-a");
    let kept: Lease = text.parse().expect("a lease");
    let resumed = restarted.resume(kept.clone()).await.expect("still held");
    assert!(
        resumed.term() > kept.fencing_token(),
        "a new term fences the old process"
    );
    let seen = restarted.leader().await.expect("reads").expect("leads");
    assert_eq!((seen.term(), seen.value()), (resumed.term(), &b"pod-a"[..]));
    let twice = restarted.resume(kept).await;
    assert!(
        matches!(twice, Err(LockError::NotOwned { .. })),
        "{twice:?}"
    );
    sleep(LEASE * 3).await;
    assert!(resumed.is_leader(), "renewed");
}

/// A backend that issues no fencing tokens (PostgreSQL's advisory mode, a Redis lock with
/// fencing off): no term to give.
struct NoFencing(MemoryLock);

#[async_trait]
impl Lock for NoFencing {
    fn backend(&self) -> &'static str {
        "no-fencing"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::MUTEX.with_fencing(Fencing::None)
    }
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        self.0.try_acquire(name, token, ttl).await
    }
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        self.0.extend(lease, ttl).await
    }
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        self.0.release(lease).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_backend_without_ordered_fencing_refuses_elections_and_observers_need_holders() {
    let locker = Locker::new(NoFencing(MemoryLock::new()));
    let election = locker.elect("scheduler");
    let refused = election.campaign().await;
    assert!(
        matches!(
            refused,
            Err(LockError::Unsupported {
                kind: "election",
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(
        locker
            .lock("scheduler")
            .try_acquire()
            .await
            .expect("answers")
            .is_some(),
        "nothing taken"
    );
    let unread = election.leader().await;
    assert!(
        matches!(unread, Err(LockError::Unsupported { kind: "holder", .. })),
        "{unread:?}"
    );
    let mut changes = Box::pin(election.observe());
    assert!(matches!(
        changes.next().await,
        Some(Err(LockError::Unsupported { .. }))
    ));
    assert!(changes.next().await.is_none(), "the stream ends");
}

/// A single try on a free election wins it and names it; on a led one it answers `None`
/// without waiting (cargo-mutants found `try_campaign` → `Ok(None)` and `name` → `""` alive).
#[tokio::test(start_paused = true)]
async fn a_single_try_wins_a_free_election_and_the_election_has_its_name() {
    let (_, lockers) = lockers(2);
    let a = lockers[0].elect("reports").value("pod-a");
    let b = lockers[1].elect("reports").value("pod-b");
    assert_eq!(a.name(), "reports");
    let won = a
        .try_campaign()
        .await
        .expect("answers")
        .expect("nobody led: a single try wins");
    assert_eq!(won.value(), b"pod-a");
    let seen = b.leader().await.expect("reads").expect("a leads");
    assert_eq!(seen.term(), won.term());
    assert!(
        b.try_campaign().await.expect("answers").is_none(),
        "a single try does not take a led election"
    );
    won.resign().await.expect("still ours");
    let next = b
        .try_campaign()
        .await
        .expect("answers")
        .expect("free again after the resignation");
    assert!(next.term() > seen.term(), "terms grow");
}

/// An observer that reads a leader granted so recently that its record is not written yet
/// looks again, shortly, and sees the record (value and since); a recorded leader is read at
/// once, in one read.
#[tokio::test(start_paused = true)]
async fn a_leader_read_before_its_record_lands_is_read_again_and_a_recorded_one_at_once() {
    let store = Arc::new(MemoryLock::new());
    let slow = Locker::new(Remote::new(&store, SLOW_NOTE));
    let observer = Locker::new(Arc::clone(&store)).elect("reports");
    let campaign = tokio::spawn(async move {
        slow.elect("reports")
            .value("pod-a")
            .campaign()
            .await
            .expect("elected")
    });
    // The grant is in, the record not yet.
    sleep(SLOW_NOTE / 3).await;
    let early = observer.leader().await.expect("reads").expect("a leads");
    assert!(
        early.is_recorded() && early.since().is_some(),
        "read before the record landed, the observer gave up: {early:?}"
    );
    assert_eq!(early.value(), b"pod-a");
    let leadership = campaign.await.expect("campaign");
    let before = Instant::now();
    let later = observer.leader().await.expect("reads").expect("a leads");
    assert_eq!(later.term(), leadership.term());
    assert_eq!(
        Instant::now(),
        before,
        "a recorded leader is read without waiting"
    );
    // What a service's logs show of it.
    let shown = format!("{later:?}");
    for part in ["Leader", "term", "pod-a", "since"] {
        assert!(shown.contains(part), "{part:?} missing from {shown}");
    }
}

/// A leadership names its election and keeps the stop margin it was asked for.
#[tokio::test(start_paused = true)]
async fn a_leadership_has_its_elections_name_and_stop_margin() {
    let (_, lockers) = lockers(1);
    let margin = Duration::from_millis(700);
    let leadership = lockers[0]
        .elect("reports")
        .stop_margin(margin)
        .campaign()
        .await
        .expect("elected");
    assert_eq!(leadership.name(), "reports");
    assert_eq!(leadership.stop_margin(), margin);
}

/// An observer waits quietly while the leader stays (a read a poll, not a read a round trip),
/// and is woken by the store's release announcement: a new term after a resignation is told at
/// once, long before the next poll or the old lease's end.
#[tokio::test(start_paused = true)]
async fn an_observer_waits_quietly_for_a_new_term_and_the_release_wakes_it() {
    let store = Arc::new(MemoryLock::new());
    let remote = Remote::new(&store, Duration::ZERO);
    let poll = Duration::from_secs(10);
    let observer = Locker::new(Arc::clone(&remote))
        .elect("reports")
        .poll_interval(poll);
    let shared = Arc::clone(&remote);
    let candidate = move |value: &'static str| {
        Locker::builder(Arc::clone(&shared))
            .lease(Duration::from_secs(60))
            .build()
            .elect("reports")
            .value(value)
    };
    let first = candidate("pod-a").campaign().await.expect("elected");
    let mut changes = Box::pin(observer.observe());
    let told = changes.next().await.expect("an item").expect("reads");
    assert_eq!(told.map(|l| l.term()), Some(first.term()));

    let reads = remote.reads.load(Ordering::SeqCst);
    let quiet = timeout(Duration::from_secs(25), changes.next()).await;
    assert!(
        quiet.is_err(),
        "nothing changed, yet the observer told {quiet:?}"
    );
    let polled = remote.reads.load(Ordering::SeqCst) - reads;
    assert!(
        polled <= 4,
        "{polled} reads in 25 s at a 10 s poll while the leader stayed"
    );

    let resigned_at = Instant::now();
    let next = tokio::spawn(async move {
        let next = candidate("pod-b").campaign().await.expect("elected");
        next.leak()
    });
    first.resign().await.expect("ours");
    let told = changes.next().await.expect("an item").expect("reads");
    let next = next.await.expect("campaign");
    assert_eq!(told.map(|l| l.term()), Some(next.fencing_token()));
    assert!(
        resigned_at.elapsed() < Duration::from_secs(1),
        "the new term was told {:?} after the resignation (poll {poll:?})",
        resigned_at.elapsed()
    );
}

/// A leader that crashes (nothing resigns, nothing renews) is reported gone by an observer just
/// after its lease ends, not a poll later: the observer's wait ends a moment past the TTL the
/// store gave (never before it: on a store that answers at once, a wait that ended just before
/// would find the leader still there and look again and again).
#[tokio::test(start_paused = true)]
async fn an_observer_tells_nobody_leads_just_after_a_crashed_leaders_lease() {
    let store = Arc::new(MemoryLock::new());
    let remote = Remote::answering_in(&store, Duration::ZERO, Duration::ZERO);
    let observer = Locker::new(Arc::clone(&remote))
        .elect("reports")
        .poll_interval(Duration::from_secs(30));
    let granted_at = Instant::now();
    let crashed = Locker::builder(Arc::clone(&store))
        .lease(LEASE)
        .build()
        .elect("reports")
        .campaign()
        .await
        .expect("elected")
        .leak();
    let mut changes = Box::pin(observer.observe());
    let told = changes.next().await.expect("an item").expect("reads");
    assert_eq!(told.map(|l| l.term()), Some(crashed.fencing_token()));
    let gone = changes.next().await.expect("an item").expect("reads");
    assert!(
        gone.is_none(),
        "the crashed leader was told again: {gone:?}"
    );
    let told_after = granted_at.elapsed();
    assert!(
        remote.reads.load(Ordering::SeqCst) <= 3,
        "{} reads for one term and its end",
        remote.reads.load(Ordering::SeqCst)
    );
    assert!(
        told_after >= LEASE && told_after < LEASE + Duration::from_millis(50),
        "nobody leads was told {told_after:?} after a grant of {LEASE:?}"
    );
}

/// A term lost to another holder (the store answers "not ours" to the renewal and to the
/// release) ends `Lost` and is not resigned: a resignation would fail against a store that no
/// longer holds the lease, and report a failure the user can do nothing about.
#[tokio::test(start_paused = true)]
async fn a_term_lost_to_another_holder_ends_without_a_failed_resignation() {
    let (probe, locker) = probe_locker(LEASE);
    let mut run = locker
        .elect("scheduler")
        .run(|_watch| std::future::pending::<()>());
    let Some(TermEvent::Started { term }) = run.next_event().await else {
        panic!("a term started");
    };
    probe.stolen.store(true, Ordering::SeqCst);
    probe.disowned.store(true, Ordering::SeqCst);
    assert_eq!(
        run.next_event().await,
        Some(TermEvent::Ended {
            term,
            end: TermEnd::Lost
        })
    );
}

/// A run tied to a stop signal: running until the signal (not finished), then `wait` returns
/// only once the term is given up (the name free, the run finished). A dropped run stops too:
/// its term is given up in the background, well before its lease would end.
#[tokio::test(start_paused = true)]
async fn a_runs_wait_returns_after_its_term_is_given_up_and_a_dropped_run_stops() {
    let (_, lockers) = lockers(1);
    let locker = &lockers[0];
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut run = locker
        .elect("scheduler")
        .run(|_term| std::future::pending::<()>())
        .stop_on(async move {
            let _ = stopped.await;
        });
    assert!(matches!(
        run.next_event().await,
        Some(TermEvent::Started { .. })
    ));
    assert!(!run.is_finished(), "a leading run is not finished");
    assert!(format!("{run:?}").contains("finished: false"), "{run:?}");
    stop.send(()).expect("the run listens");
    run.wait().await;
    assert!(run.is_finished());
    assert!(
        is_free(locker, "scheduler").await,
        "wait returned before the term was given up"
    );
    // The free try's guard is released in the background before the next grant.
    sleep(Duration::from_millis(10)).await;

    let run = locker
        .elect("scheduler")
        .run(|_term| std::future::pending::<()>());
    sleep(Duration::from_millis(10)).await;
    assert!(!is_free(locker, "scheduler").await, "the run leads");
    drop(run);
    sleep(Duration::from_millis(10)).await;
    assert!(
        is_free(locker, "scheduler").await,
        "a dropped run kept its term"
    );
}
