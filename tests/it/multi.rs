//! A list of templates: `#[distributed_lock(["account:{from}", "account:{to}"], ..)]` holds
//! every rendered name at once (`Locker::lock_all`), all or nothing, in one global order, so
//! calls over the same names in any order never deadlock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use distlock::metrics as metric;
use distlock::{LockError, Locker, MemoryLock, distributed_lock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tokio::time::{Instant, sleep, timeout};

use crate::common::{Backend, SOON, in_task};

/// Whether another task gets `name` on one try (and gives it back at once).
async fn free_elsewhere(locker: &Locker, name: String) -> bool {
    let locker = locker.clone();
    tokio::spawn(async move {
        match locker.lock(name).try_acquire().await.expect("no error") {
            Some(guard) => {
                guard.release().await.expect("release");
                true
            }
            None => false,
        }
    })
    .await
    .expect("no panic")
}

/// What the body saw: whether each name was free to another task, and its leases' names.
#[derive(Debug)]
struct Seen {
    from_free: bool,
    to_free: bool,
    leases: Vec<String>,
    first: String,
}

#[distributed_lock(["account:{from}", "account:{to}"], locker = locker, wait = "2s")]
async fn transfer(locker: &Locker, from: u32, to: u32) -> Result<Seen, LockError> {
    Ok(Seen {
        from_free: free_elsewhere(locker, format!("account:{from}")).await,
        to_free: free_elsewhere(locker, format!("account:{to}")).await,
        leases: distlock::current_leases()
            .iter()
            .map(|lease| lease.name().to_owned())
            .collect(),
        first: distlock::current_lease().expect("inside").name().to_owned(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_name_is_held_inside_the_body() {
    in_task(async {
        let locker = Locker::new(MemoryLock::new());
        let seen = transfer(&locker, 7, 3).await.expect("free");
        assert!(!seen.from_free, "account:7 is held: {seen:?}");
        assert!(!seen.to_free, "account:3 is held: {seen:?}");
        assert_eq!(seen.leases, ["account:7", "account:3"], "in template order");
        assert_eq!(
            seen.first, "account:7",
            "current_lease: the first template's"
        );
        assert!(free_elsewhere(&locker, "account:7".to_owned()).await);
        assert!(free_elsewhere(&locker, "account:3".to_owned()).await);
        assert!(distlock::current_leases().is_empty(), "outside: none");

        // Both templates render one name: one lease, seen at both places.
        let seen = transfer(&locker, 5, 5).await.expect("free");
        assert!(!seen.from_free);
        assert_eq!(seen.leases, ["account:5", "account:5"]);
        assert!(free_elsewhere(&locker, "account:5".to_owned()).await);
    })
    .await;
}

/// Moves one unit, checking that nobody else is between the two accounts meanwhile.
#[distributed_lock(["account:{from}", "account:{to}"], locker = locker, wait = "30s")]
async fn move_one(
    locker: &Locker,
    from: u32,
    to: u32,
    inside: &AtomicBool,
    moves: &AtomicU32,
) -> Result<(), LockError> {
    assert!(!inside.swap(true, Ordering::SeqCst), "two bodies at once");
    tokio::task::yield_now().await;
    sleep(Duration::from_micros(200)).await;
    inside.store(false, Ordering::SeqCst);
    moves.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_orders_from_many_tasks_never_deadlock() {
    const TASKS: u32 = 8;
    const ROUNDS: u32 = 20;
    let locker = Locker::new(MemoryLock::new());
    let inside = Arc::new(AtomicBool::new(false));
    let moves = Arc::new(AtomicU32::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (locker, inside, moves) = (locker.clone(), inside.clone(), moves.clone());
            tokio::spawn(async move {
                for round in 0..ROUNDS {
                    let (from, to) = if (task + round) % 2 == 0 {
                        (3, 7)
                    } else {
                        (7, 3)
                    };
                    move_one(&locker, from, to, &inside, &moves)
                        .await
                        .expect("granted within the wait");
                }
            })
        })
        .collect();
    timeout(Duration::from_secs(60), async {
        for task in tasks {
            task.await.expect("no panic");
        }
    })
    .await
    .expect("no deadlock: every call finished");
    assert_eq!(moves.load(Ordering::SeqCst), TASKS * ROUNDS);
}

#[distributed_lock(["job:{a}", "job:{b}"], locker = locker, skip)]
async fn pair_job(locker: &Locker, a: &str, b: &str, runs: &AtomicU32) -> Option<u32> {
    Some(runs.fetch_add(1, Ordering::SeqCst) + 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_skips_the_body_when_any_name_is_busy() {
    in_task(async {
        let backend = Backend::memory();
        let locker = &backend.locker;
        let runs = AtomicU32::new(0);
        assert_eq!(
            pair_job(locker, "a", "b", &runs).await,
            Some(1),
            "free: ran"
        );

        let release = backend.hold_elsewhere("job:b").await;
        let started = Instant::now();
        assert_eq!(
            pair_job(locker, "a", "b", &runs).await,
            None,
            "busy: skipped"
        );
        assert!(started.elapsed() < SOON, "one try, no wait");
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the body did not run");
        assert!(
            backend.is_free("job:a").await,
            "all or nothing: job:a not kept"
        );
        assert_eq!(
            pair_job(locker, "a", "c", &runs).await,
            Some(2),
            "others free"
        );
        drop(release);
        sleep(Duration::from_millis(50)).await;
        assert_eq!(pair_job(locker, "a", "b", &runs).await, Some(3), "released");
    })
    .await;
}

/// Re-enters: the names are this task's already.
#[distributed_lock(["account:{a}", "account:{b}"], locker = locker)]
async fn outer(locker: &Locker, a: u32, b: u32) -> Result<(Vec<u64>, u64, Vec<u64>), LockError> {
    let tokens = fencing_tokens();
    let single = audit_one(locker, b).await?;
    let reversed = audit_both(locker, b, a).await?;
    Ok((tokens, single, reversed))
}

#[distributed_lock("account:{id}", locker = locker, wait = "0s")]
async fn audit_one(locker: &Locker, id: u32) -> Result<u64, LockError> {
    Ok(distlock::current_lease().expect("inside").fencing_token())
}

#[distributed_lock(["account:{a}", "account:{b}"], locker = locker, wait = "0s")]
async fn audit_both(locker: &Locker, a: u32, b: u32) -> Result<Vec<u64>, LockError> {
    Ok(fencing_tokens())
}

fn fencing_tokens() -> Vec<u64> {
    distlock::current_leases()
        .iter()
        .map(distlock::LeaseWatch::fencing_token)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_call_reenters() {
    in_task(async {
        let locker = Locker::new(MemoryLock::new());
        let (tokens, single, reversed) = outer(&locker, 1, 2).await.expect("no self-deadlock");
        assert_eq!(tokens.len(), 2);
        assert!(tokens.iter().all(|&token| token > 0));
        assert_eq!(
            single, tokens[1],
            "the single lock shares account:2's lease"
        );
        assert_eq!(
            reversed,
            [tokens[1], tokens[0]],
            "in its own template order"
        );
        assert!(free_elsewhere(&locker, "account:1".to_owned()).await);
        assert!(free_elsewhere(&locker, "account:2".to_owned()).await);
    })
    .await;
}

#[distributed_lock(["lease:{id}", "other:{id}"], locker = locker)]
async fn until_lost(locker: &Locker, id: u32, started: &AtomicBool) -> Result<(), LockError> {
    started.store(true, Ordering::SeqCst);
    sleep(Duration::from_secs(60)).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_any_lease_cancels_the_body() {
    in_task(async {
        // A short lease, renewed every 100 ms, so the theft is noticed soon.
        let backend = Arc::new(Backend::memory_with(|builder| {
            builder.lease(Duration::from_millis(300))
        }));
        let started = Arc::new(AtomicBool::new(false));
        let call = tokio::spawn({
            let (backend, started) = (backend.clone(), started.clone());
            async move { until_lost(&backend.locker, 1, &started).await }
        });
        while !started.load(Ordering::SeqCst) {
            sleep(Duration::from_millis(10)).await;
        }
        backend.steal("other:1");
        let result = timeout(SOON, call)
            .await
            .expect("cancelled soon")
            .expect("no panic");
        match result {
            Err(LockError::Lost { name }) => assert_eq!(name, "other:1"),
            other => panic!("expected Lost, got {other:?}"),
        }
        assert!(
            backend.free_within("lease:1", SOON).await,
            "the other lease is released (in the background)"
        );
    })
    .await;
}

#[distributed_lock(["report:{day}", "ledger:{day}"], locker = locker, skip, ttl = "5s", min_hold = "400ms")]
async fn nightly(locker: &Locker, day: u32) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_hold_keeps_every_name() {
    in_task(async {
        let locker = Locker::new(MemoryLock::new());
        let started = Instant::now();
        nightly(&locker, 1).await;
        for name in ["report:1", "ledger:1"] {
            if started.elapsed() < Duration::from_millis(300) {
                assert!(
                    !free_elsewhere(&locker, name.to_owned()).await,
                    "{name} kept"
                );
            }
        }
        sleep(Duration::from_millis(600).saturating_sub(started.elapsed())).await;
        for name in ["report:1", "ledger:1"] {
            assert!(
                free_elsewhere(&locker, name.to_owned()).await,
                "{name} expired"
            );
        }
    })
    .await;
}

#[test]
fn the_macro_knows_the_largest_list() {
    // lock-macros refuses lists longer than its own copy of this constant.
    assert_eq!(distlock::MAX_MULTI, 64);
}

#[distributed_lock(["account:{from}", "account:{to}"], locker = locker)]
async fn default_label(locker: &Locker, from: u32, to: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{from}", "account:{to}"], locker = locker, name = "transfer")]
async fn named(locker: &Locker, from: u32, to: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(["account:{id}"], locker = locker)]
async fn list_of_one(locker: &Locker, id: u32) -> Result<usize, LockError> {
    Ok(distlock::current_leases().len())
}

#[test]
fn the_label_is_the_templates_joined_or_the_name() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(async {
                let locker = Locker::new(MemoryLock::new());
                default_label(&locker, 1, 2).await.expect("free");
                default_label(&locker, 3, 4).await.expect("free");
                named(&locker, 1, 2).await.expect("free");
                assert_eq!(list_of_one(&locker, 9).await.expect("free"), 1);
            });
    });
    let mut labels: Vec<String> = recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, _, _, value)| {
            key.key().name() == metric::ACQUIRED_TOTAL && matches!(value, DebugValue::Counter(_))
        })
        .filter_map(|(key, ..)| {
            key.key()
                .labels()
                .find(|label| label.key() == "lock")
                .map(|label| label.value().to_owned())
        })
        .collect();
    labels.sort();
    labels.dedup();
    assert_eq!(
        labels,
        ["account:{from}+account:{to}", "account:{id}", "transfer"]
    );
}

#[async_trait::async_trait]
trait Ledger {
    async fn post(&self, from: u32, to: u32) -> Result<Vec<String>, LockError>;
}

struct Bank {
    locker: Locker,
    tenant: &'static str,
}

#[async_trait::async_trait]
impl Ledger for Bank {
    #[distributed_lock(["{self.tenant}:{from}", "{self.tenant}:{to}"], locker = self.locker)]
    async fn post(&self, from: u32, to: u32) -> Result<Vec<String>, LockError> {
        Ok(distlock::current_leases()
            .iter()
            .map(|lease| lease.name().to_owned())
            .collect())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_works_in_an_async_trait_impl() {
    in_task(async {
        let bank = Bank {
            locker: Locker::new(MemoryLock::new()),
            tenant: "acme",
        };
        assert_eq!(bank.post(2, 1).await.expect("free"), ["acme:2", "acme:1"]);
    })
    .await;
}
