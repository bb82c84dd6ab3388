//! Held transactions (`EtcdLock::held_txn`, `held_commit`) against a real member: a
//! write commits while its guard holds the lock; once the lease is gone (expired, released
//! under it, taken by a successor) nothing of it applies and the error is `Fenced` with the
//! successor's revision; the successor's writes all apply; holders taking turns never lose an
//! update; and a holder *process* `SIGSTOP`ped past its lease, resumed after its successor
//! wrote, is refused. Every kind with a token is guarded by the revision that is its token.

use std::time::Duration;

use etcd_client::{GetOptions, KeyValue, TxnOp};
use lock_core::{LockError, Locker, MemoryLock};
use lock_etcd::EtcdLock;
use lock_testkit::spawn_test_process;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::common::{lock_at, lock_on, one_member};

/// How long a test waits for a lock another holder has (or had): far above any lease here.
const WAIT: Duration = Duration::from_secs(60);
/// How often a test looks at etcd while it waits for something there.
const POLL: Duration = Duration::from_millis(50);
/// The most polls of [`POLL`] a test makes before it gives up (60 s).
const POLLS: u32 = 1_200;

/// The key-value pair at `key`, read with a client of `lock`.
async fn get(lock: &EtcdLock, key: impl Into<Vec<u8>>) -> Option<KeyValue> {
    let mut kv = lock.client().await.expect("client").kv_client();
    let answer = kv.get(key.into(), None).await.expect("get");
    answer.kvs().first().cloned()
}

/// The text stored at `key`.
async fn text(lock: &EtcdLock, key: &str) -> Option<String> {
    get(lock, key)
        .await
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned())
}

/// Polls (bounded) until the lock key of `name` no longer carries revision `token`: the grant
/// expired or was replaced. Not a timed assertion: it waits for the fact.
async fn until_replaced(lock: &EtcdLock, name: &str, token: u64) {
    for _ in 0..POLLS {
        match get(lock, lock.key(name)).await {
            Some(kv) if u64::try_from(kv.mod_revision()) == Ok(token) => {}
            _ => return,
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("the grant {token} of {name:?} never ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_write_commits_while_held_and_never_after_a_successor() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let first = Locker::new(lock.clone());
    let guard = first
        .lock("g")
        .fixed_ttl(Duration::from_secs(1))
        .wait(WAIT)
        .await
        .expect("granted");
    let token = guard.fencing_token();
    let answer = lock
        .held_commit(&guard, [TxnOp::put("data", "first", None)])
        .await
        .expect("held: committed");
    assert_eq!(answer.op_responses().len(), 1, "one answer per op");
    let own = lock
        .held_txn(&guard)
        .expect("a mutex guard")
        .and_then([TxnOp::put("by", "first", None)]);
    let mut client = lock.client().await.expect("client");
    assert!(client.txn(own).await.expect("txn").succeeded());

    // Not renewed: the successor gets the name once etcd expired the first grant.
    let second = Locker::new(lock.clone());
    let successor = tokio::spawn(async move { second.lock("g").wait(WAIT).await })
        .await
        .expect("task")
        .expect("the successor is granted");
    let next = successor.fencing_token();
    assert!(next > token);
    match lock
        .held_commit(&guard, [TxnOp::put("data", "stale", None)])
        .await
    {
        Err(LockError::Fenced {
            resource,
            token: refused,
            current,
        }) => assert_eq!((resource.as_str(), refused, current), ("g", token, next)),
        other => panic!("a stale write was not fenced: {other:?}"),
    }
    let stale = lock
        .held_txn(&guard)
        .expect("a mutex guard")
        .and_then([TxnOp::put("by", "stale", None)]);
    assert!(!client.txn(stale).await.expect("txn").succeeded());
    for i in 0..10 {
        lock.held_commit(
            &successor,
            [TxnOp::put("data", format!("second {i}"), None)],
        )
        .await
        .expect("the successor's write applies");
    }
    assert_eq!(text(&lock, "data").await.as_deref(), Some("second 9"));
    assert_eq!(text(&lock, "by").await.as_deref(), Some("first"));
    successor.release().await.expect("released");
    drop(guard);
}

#[tokio::test]
async fn a_guard_of_another_backend_never_commits() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let elsewhere = Locker::new(MemoryLock::new());
    let guard = elsewhere.lock("g").await.expect("granted in memory");
    let foreign = || lock.held_commit(&guard, [TxnOp::put("data", "foreign", None)]);
    // The name free on etcd: the key holds nothing.
    assert!(matches!(foreign().await, Err(LockError::Fenced { resource, .. }) if resource == "g"));
    // The name held on etcd: its key holds the etcd holder's token, not the memory guard's.
    let on_etcd = Locker::new(lock.clone()).lock("g").await.expect("granted");
    assert!(matches!(foreign().await, Err(LockError::Fenced { resource, .. }) if resource == "g"));
    assert_eq!(text(&lock, "data").await, None);
    on_etcd.release().await.expect("released");
}

#[tokio::test]
async fn every_kind_with_a_token_is_guarded_by_its_revision() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let locker = Locker::new(lock.clone());
    let commit = |guard: &lock_core::Guard, value: &'static str| {
        let (lock, guard_txn) = (lock.clone(), lock.held_txn(guard));
        let ops = [TxnOp::put("data", value, None)];
        async move {
            let txn = guard_txn.expect("a guard with a token").and_then(ops);
            let mut client = lock.client().await.expect("client");
            client.txn(txn).await.expect("txn").succeeded()
        }
    };

    // The mutex, then handed over (adopt): the key's mod_revision is the new token, its
    // create_revision the first grant's.
    let guard = locker.lock("m").await.expect("granted");
    assert!(commit(&guard, "mutex").await);
    let first = guard.fencing_token();
    let adopted = locker.adopt(guard.leak()).await.expect("adopted");
    assert!(adopted.fencing_token() > first);
    let kv = get(&lock, lock.key("m")).await.expect("held");
    assert_eq!(u64::try_from(kv.create_revision()), Ok(first));
    assert_eq!(
        u64::try_from(kv.mod_revision()),
        Ok(adopted.fencing_token())
    );
    assert!(commit(&adopted, "handed over").await);
    adopted.release().await.expect("released");

    let fair = locker.fair("f").await.expect("granted");
    assert!(commit(&fair, "fair").await);
    fair.release().await.expect("released");

    // A read share of a name never written has token 0, and holds all the same.
    let reader = locker.read("rw").await.expect("granted");
    assert_eq!(reader.fencing_token(), 0);
    assert!(commit(&reader, "reader 0").await);
    reader.release().await.expect("released");
    let writer = locker.write("rw").await.expect("granted");
    let written = writer.fencing_token();
    assert!(commit(&writer, "writer").await);
    writer.release().await.expect("released");
    let reader = locker.read("rw").await.expect("granted");
    assert_eq!(reader.fencing_token(), written, "the last write's revision");
    assert!(commit(&reader, "reader").await);
    // Released under the guard (by another locker): refused, nothing applied.
    Locker::new(lock.clone())
        .release(&reader.lease())
        .await
        .expect("released");
    assert!(!commit(&reader, "released reader").await);
    assert!(matches!(
        lock.held_commit(&reader, [TxnOp::put("data", "x", None)]).await,
        Err(LockError::Fenced { token, current, .. }) if token == written && current > written
    ));
    drop(reader);

    let both = locker.lock_all(["m1", "m2"]).await.expect("granted");
    for guard in both.guards() {
        assert!(commit(guard, "multi").await);
    }
    both.release().await.expect("released");
    assert_eq!(text(&lock, "data").await.as_deref(), Some("multi"));

    let permits = locker.semaphore("s", 2).await.expect("granted");
    assert!(matches!(
        lock.held_txn(&permits),
        Err(LockError::InvalidInput { .. })
    ));
    assert!(matches!(
        lock.held_commit(&permits, [TxnOp::put("data", "x", None)])
            .await,
        Err(LockError::InvalidInput { .. })
    ));
    permits.release().await.expect("released");
}

/// One holder's turns at the counter: read it, then write it plus one in a guarded commit.
/// Overrunning, the holder waits until its grant is gone before it writes. Its commits, as
/// (commit revision, fencing token), and how many were refused.
async fn take_turns(lock: EtcdLock, rounds: u32, overrun: Option<u32>) -> (Vec<(i64, u64)>, u32) {
    let locker = Locker::new(lock.clone());
    let (mut commits, mut refused) = (Vec::new(), 0);
    for round in 0..rounds {
        // A long lease, so that only the overrun round's grant ends before its write.
        let ttl = Duration::from_secs(if overrun == Some(round) { 1 } else { 10 });
        let guard = locker
            .lock("turns")
            .fixed_ttl(ttl)
            .wait(WAIT)
            .await
            .expect("granted");
        let token = guard.fencing_token();
        let seen: u64 = text(&lock, "counter")
            .await
            .map_or(0, |t| t.parse().expect("a count"));
        if overrun == Some(round) {
            until_replaced(&lock, "turns", token).await;
        }
        let ops = [
            TxnOp::put("counter", (seen + 1).to_string(), None),
            TxnOp::put(format!("turns/{token}"), "", None),
        ];
        match lock.held_commit(&guard, ops).await {
            Ok(answer) => commits.push((answer.header().expect("header").revision(), token)),
            Err(LockError::Fenced { current, .. }) => {
                assert!(current > token, "{current} > {token}");
                refused += 1;
            }
            Err(other) => panic!("{other}"),
        }
        // The overrun guard's release answers not-owned.
        let _ = guard.release().await;
    }
    (commits, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_taking_turns_never_lose_an_update() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let tasks: Vec<_> = (0..3)
        .map(|i| tokio::spawn(take_turns(lock.clone(), 5, (i == 0).then_some(2))))
        .collect();
    let (mut commits, mut refused) = (Vec::new(), 0);
    for task in tasks {
        let (c, r) = task.await.expect("task");
        commits.extend(c);
        refused += r;
    }
    assert_eq!(refused, 1, "the overrun write, and only it, is refused");
    let counter: usize = text(&lock, "counter")
        .await
        .expect("written")
        .parse()
        .expect("a count");
    assert_eq!(counter, commits.len(), "every commit counted once");
    assert_eq!(counter, 14);
    // In commit order, the tokens never go back: no holder wrote after its successor.
    commits.sort_unstable();
    assert!(commits.windows(2).all(|w| w[0].1 <= w[1].1), "{commits:?}");
}

/// The variable that carries the member's endpoints to the holder process.
const STORE_VAR: &str = "DISTLOCK_GUARDED_STORE";
/// The name the holder process and its successor take.
const PAUSED: &str = "paused";
/// The holder process's renewed lease.
const LEASE: Duration = Duration::from_secs(2);

/// The holder process: holds [`PAUSED`] (renewed) and writes through guarded commits every
/// 50 ms, each write logged under `child/`, until one is refused; it records the refusal
/// (`refused` = its token and the error's `current`) and exits. The parent stops it between
/// two writes, lets a successor take the lock and write, and resumes it.
#[tokio::test]
#[ignore = "a holder process of held.rs"]
async fn paused_holder() {
    let store = std::env::var(STORE_VAR).expect("the store's endpoints");
    let lock = lock_at(store.split(',').map(str::to_owned).collect());
    let guard = Locker::new(lock.clone())
        .lock(PAUSED)
        .lease(LEASE)
        .wait(WAIT)
        .await
        .expect("granted");
    let token = guard.fencing_token();
    // 600 writes are 30 s of running; the parent resumes the process well before.
    for i in 0..600 {
        let ops = [
            TxnOp::put("data", format!("holder {token} {i}"), None),
            TxnOp::put(format!("child/{i:05}"), token.to_string(), None),
        ];
        match lock.held_commit(&guard, ops).await {
            Err(LockError::Fenced { current, .. }) => {
                record(&lock, format!("{token} {current}")).await;
                return;
            }
            // Resumed, the process may find its connection broken: a retryable error, tried
            // again (within the 600).
            Ok(_) => {}
            Err(err) if err.is_retryable() => {}
            Err(other) => panic!("{other}"),
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("never refused");
}

/// Puts `refused` = `what`, trying again (bounded) while the connection recovers.
async fn record(lock: &EtcdLock, what: String) {
    for _ in 0..100 {
        let Ok(client) = lock.client().await else {
            tokio::time::sleep(POLL).await;
            continue;
        };
        if client
            .kv_client()
            .put("refused", what.clone(), None)
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(POLL).await;
    }
    panic!("the refusal was never recorded");
}

/// Sends `signal` to the process `pid` (the holder, never a group).
fn signal(pid: u32, signal: Signal) {
    let pid = Pid::from_raw(i32::try_from(pid).expect("a pid"));
    kill(pid, signal).expect("signalled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_process_stopped_past_its_lease_is_refused() {
    let cluster = one_member();
    let lock = lock_on(&cluster);
    let mut holder = spawn_test_process(
        &lock_testkit::child_test!(paused_holder),
        &[(STORE_VAR, cluster.endpoints().join(","))],
    )
    .expect("the holder process");
    let pid = holder.id().expect("running");
    let mut written = None;
    for _ in 0..POLLS {
        written = text(&lock, "data").await;
        if written.is_some() {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    let written = written.expect("the holder never wrote");
    let token: u64 = written
        .split(' ')
        .nth(1)
        .expect("a token")
        .parse()
        .expect("a number");

    signal(pid, Signal::SIGSTOP);
    let successor = Locker::new(lock.clone())
        .lock(PAUSED)
        .wait(WAIT)
        .await
        .expect("the successor is granted once the stopped holder's lease ran out");
    let next = successor.fencing_token();
    assert!(next > token);
    for i in 0..20 {
        lock.held_commit(
            &successor,
            [TxnOp::put("data", format!("successor {i}"), None)],
        )
        .await
        .expect("the successor's write applies");
    }
    signal(pid, Signal::SIGCONT);
    let status = tokio::time::timeout(WAIT, holder.wait())
        .await
        .expect("the holder ends")
        .expect("its status");
    assert!(status.success(), "the holder process failed: {status}");

    assert_eq!(
        text(&lock, "refused").await,
        Some(format!("{token} {next}")),
        "refused with the successor's revision"
    );
    assert_eq!(text(&lock, "data").await.as_deref(), Some("successor 19"));
    let mut kv = lock.client().await.expect("client").kv_client();
    let log = kv
        .get("child/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("the holder's log");
    assert!(!log.kvs().is_empty());
    for kv in log.kvs() {
        let at = u64::try_from(kv.mod_revision()).expect("a revision");
        assert!(
            at < next,
            "the holder wrote at {at}, after its successor's grant {next}"
        );
    }
    successor.release().await.expect("released");
}
