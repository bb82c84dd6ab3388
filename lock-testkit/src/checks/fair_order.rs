//! The fair lock's order check across OS processes, shared by the backends' process tests: the
//! contended loop every task runs, the mark a request takes when it is first queued, and the
//! judge of the grant records.
//!
//! Every request of the loop ([`contend`]) records three numbers drawn from one shared
//! sequence: just before it asks (`asked`), just after its first busy answer, when its entry
//! is certainly in the server's queue (`queued`, taken by [`mark_queued`] in the backend's
//! wrapper; none if it was granted at its first attempt), and inside its critical section,
//! once granted (`granted`). One sequence orders all three kinds of event across the
//! processes; the `granted` numbers are taken under the lock, so they are in the order of the
//! grants. [`judge`] then checks, over the [`Grant`]s of every process, that no grant overtook
//! a request of another process that had queued before it asked, and that the processes had
//! about the same number of grants.
//!
//! Where the sequence, the count and the records are kept is the backend's test's business (a
//! Redis list, a PostgreSQL table): it implements [`Witness`] over its own storage and reads
//! the records back itself.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::Attempt;
use lock_core::{LockError, Locker};

use crate::history::Share;
use crate::history::record::{self, Recorder};

tokio::task_local! {
    /// The `queued` number of the request this task is making, once it had a busy answer.
    static QUEUED: Cell<Option<i64>>;
}

/// One granted request, as recorded by its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// The process that made the request.
    pub pid: i64,
    /// The task of that process that made it.
    pub task: i64,
    /// The sequence number taken just before it asked.
    pub asked: i64,
    /// The sequence number taken at its first busy answer (its entry was in the server's
    /// queue by then); `None` when it was granted at its first attempt.
    pub queued: Option<i64>,
    /// The sequence number taken inside its critical section, once granted.
    pub granted: i64,
    /// Its place among the grants (1-based); beyond the grants counted, a task's last,
    /// uncounted one.
    pub n: i64,
}

/// Where the tasks of [`contend`] take their numbers and leave their records: the backend's
/// test keeps them in its own storage, shared by every process of the test.
#[async_trait]
pub trait Witness: Send + Sync {
    /// The next number of the sequence that orders every event of every process.
    async fn next_number(&self) -> i64;
    /// Counts one grant and returns the count so far (the grant's [`Grant::n`]).
    async fn count_grant(&self) -> i64;
    /// Keeps the record of one grant, for the parent test to read back.
    async fn record(&self, grant: Grant);
}

/// Takes the `queued` number of the request the current task of [`contend`] is making:
/// on its first busy answer (`answer` is `Ok(Attempt::Busy { .. })` and no number was taken
/// for this request yet), a number from `next_number`. The backend's test calls it from its
/// wrapper of the lock, after every attempt; outside [`contend`] it does nothing.
pub async fn mark_queued<F, Fut>(answer: &Result<Attempt, LockError>, next_number: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = i64>,
{
    let first_busy = matches!(answer, Ok(Attempt::Busy { .. }))
        && QUEUED.try_with(|q| q.get().is_none()).unwrap_or(false);
    if first_busy {
        let number = next_number().await;
        let _ = QUEUED.try_with(|q| q.set(Some(number)));
    }
}

/// One task of one process: requests `name` (the plain `lock` when `plain`, else the fair
/// lock; a 10 s fixed lease, waiting at most 30 s), records the grant in `witness`, works
/// briefly and releases, until a grant finds `grants` counted (bounded by the count itself:
/// every round is one grant of the `grants` + extras). The `locker` must lock through a
/// wrapper that calls [`mark_queued`]. When the environment names a history directory
/// ([`HISTORY_DIR_VAR`](crate::history::record::HISTORY_DIR_VAR)), each grant's valid lease is
/// recorded there for the history checker.
///
/// # Panics
/// When a request is not granted in time or the release finds the lease lost.
pub async fn contend(
    locker: &Locker,
    plain: bool,
    name: &str,
    grants: i64,
    task: i64,
    witness: &impl Witness,
) {
    QUEUED
        .scope(Cell::new(None), async {
            let pid = i64::from(std::process::id());
            let recorder = Recorder::from_env();
            for _ in 0..grants {
                QUEUED.with(|q| q.set(None));
                let asked = witness.next_number().await;
                let requested_ns = record::monotonic_ns();
                let request = if plain {
                    locker.lock(name)
                } else {
                    locker.fair(name)
                };
                let guard = request
                    .fixed_ttl(Duration::from_secs(10))
                    .wait(Duration::from_secs(30))
                    .await
                    .expect("granted");
                let start_ns = record::monotonic_ns();
                let granted = witness.next_number().await;
                let n = witness.count_grant().await;
                let queued = QUEUED.with(Cell::get);
                witness
                    .record(Grant {
                        pid,
                        task,
                        asked,
                        queued,
                        granted,
                        n,
                    })
                    .await;
                tokio::time::sleep(Duration::from_millis(3)).await;
                if let Some(recorder) = &recorder {
                    let times = (requested_ns, start_ns);
                    recorder.lease(name, &guard, times, Share::Exclusive);
                }
                guard.release().await.expect("ours");
                if n >= grants {
                    return;
                }
            }
        })
        .await;
}

/// What [`judge`] found in the grant records of one run.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The grants counted (the first `grants` of the run).
    pub grants: i64,
    /// How many records there were (the counted grants and every task's last, uncounted one).
    pub recorded: usize,
    /// The counted grants of every process, by PID.
    pub shares: BTreeMap<i64, i64>,
    /// The sum of the shares.
    pub counted: i64,
    /// How many requests were queued (had a busy answer) before their grant.
    pub queued: usize,
    /// The ordered pairs of requests of different processes that the order rule covers.
    pub covered: usize,
    /// The pairs that broke it: a request `x` that had queued, and a request `y` of another
    /// process that asked after that and was granted before `x`.
    pub broken: Vec<(Grant, Grant)>,
}

/// Judges the grant records of one run in which `grants` grants were counted.
///
/// The order rule, over every pair of requests `x`, `y` of **different** processes: if `x` was
/// in the server's queue before `y` asked (`x.queued < y.asked`), then `x` was granted before
/// `y` (`x.granted < y.granted`).
///
/// Why this is the right amount of slack: between `asked` and its first attempt reaching the
/// server a request may be overtaken by any request that reaches the server in between — the
/// order of arrival is the server's, and the client cannot see it. But once `x` has had a busy
/// answer with its own entry in the queue (`queued`), every request that asks after that point
/// arrives behind it, and its process may not be granted the lock until `x`'s entry is gone:
/// granted to `x`, or withdrawn when `x` gives up (which fails the test anyway). Within one
/// process only the first waiting task holds an entry (the others queue locally, first-in
/// first-out), so pairs of one process are not checked.
///
/// The shares count, per process, the grants numbered 1 to `grants`.
#[must_use]
pub fn judge(records: &[Grant], grants: i64) -> Verdict {
    let mut shares: BTreeMap<i64, i64> = BTreeMap::new();
    for r in records {
        let share = shares.entry(r.pid).or_default();
        if r.n <= grants {
            *share += 1;
        }
    }
    let mut covered = 0;
    let mut broken = Vec::new();
    for x in records {
        let Some(queued) = x.queued else { continue };
        for y in records {
            if y.pid != x.pid && queued < y.asked {
                covered += 1;
                if y.granted < x.granted {
                    broken.push((*x, *y));
                }
            }
        }
    }
    Verdict {
        grants,
        recorded: records.len(),
        counted: shares.values().sum(),
        shares,
        queued: records.iter().filter(|r| r.queued.is_some()).count(),
        covered,
        broken,
    }
}

impl Verdict {
    /// The fewest and the most grants of one process (0 when there were none).
    #[must_use]
    pub fn fewest_and_most(&self) -> (i64, i64) {
        (
            self.shares.values().copied().min().unwrap_or(0),
            self.shares.values().copied().max().unwrap_or(0),
        )
    }

    /// Prints the verdict to stderr, under `label` (the kind of lock the run took): the
    /// counts, the shares, and the first five broken pairs.
    pub fn report(&self, label: &str) {
        let (min, max) = self.fewest_and_most();
        eprintln!(
            "{label}: {} grants recorded ({} counted), grants per process {:?}, most / fewest \
             {:.2}; {} requests queued; {} ordered pairs covered by the check, {} broken",
            self.recorded,
            self.counted,
            self.shares.values().collect::<Vec<_>>(),
            max as f64 / min.max(1) as f64,
            self.queued,
            self.covered,
            self.broken.len()
        );
        for (x, y) in self.broken.iter().take(5) {
            eprintln!(
                "  pid {} task {} (asked at {}) was granted at {}, before pid {} task {} (queued \
                 at {:?}, granted at {})",
                y.pid, y.task, y.asked, y.granted, x.pid, x.task, x.queued, x.granted
            );
        }
    }

    /// Asserts that the run was fair across `processes` processes: every counted grant was
    /// recorded, every process was granted, the order rule covered at least as many pairs as
    /// there were grants (else it proves nothing) and none broke it, and the most grants of
    /// one process are at most 1.5 times the fewest.
    ///
    /// # Panics
    /// When any of these does not hold (at the caller's line).
    #[track_caller]
    pub fn assert_fair(&self, processes: usize) {
        let shares = &self.shares;
        let covered = self.covered;
        let (min, max) = self.fewest_and_most();
        assert_eq!(
            self.counted, self.grants,
            "every counted grant was recorded"
        );
        assert_eq!(
            shares.len(),
            processes,
            "every process was granted: {shares:?}"
        );
        assert!(
            i64::try_from(covered).unwrap_or(i64::MAX) >= self.grants,
            "the order check covered too few pairs to mean anything: {covered}"
        );
        assert!(
            self.broken.is_empty(),
            "{} grants overtook a request of another process that had queued before they asked",
            self.broken.len()
        );
        assert!(
            max * 2 <= min * 3,
            "the shares of the processes differ by more than 1.5: {shares:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(pid: i64, asked: i64, queued: Option<i64>, granted: i64, n: i64) -> Grant {
        Grant {
            pid,
            task: 0,
            asked,
            queued,
            granted,
            n,
        }
    }

    #[test]
    fn a_grant_that_overtakes_a_queued_request_of_another_process_breaks_the_order() {
        let x = grant(1, 1, Some(2), 6, 2);
        let y = grant(2, 3, None, 4, 1);
        let verdict = judge(&[x, y], 2);
        assert_eq!((verdict.covered, verdict.broken), (1, vec![(x, y)]));
        assert_eq!(verdict.queued, 1);
    }

    #[test]
    fn pairs_of_one_process_and_requests_that_asked_first_are_not_covered() {
        let x = grant(1, 1, Some(3), 8, 2);
        let same_process = grant(1, 4, None, 5, 1);
        let asked_before = grant(2, 2, None, 6, 3);
        let verdict = judge(&[x, same_process, asked_before], 2);
        assert_eq!(verdict.covered, 0);
        assert!(verdict.broken.is_empty());
    }

    #[test]
    fn shares_count_only_the_counted_grants() {
        let records = [
            grant(1, 1, None, 2, 1),
            grant(2, 3, None, 4, 2),
            grant(2, 5, None, 6, 3),
        ];
        let verdict = judge(&records, 2);
        assert_eq!(verdict.shares, BTreeMap::from([(1, 1), (2, 1)]));
        assert_eq!((verdict.counted, verdict.recorded), (2, 3));
        assert_eq!(verdict.fewest_and_most(), (1, 1));
    }

    #[test]
    #[should_panic(expected = "the order check covered too few pairs")]
    fn a_run_the_rule_does_not_cover_is_not_fair() {
        let records = [grant(1, 1, None, 2, 1), grant(2, 3, None, 4, 2)];
        judge(&records, 2).assert_fair(2);
    }
}
