//! The fence against a paused holder, across OS processes: a holder process takes the lock
//! (a lease of 1 s, renewed by its watchdog), writes through `distlock_fence`, and is
//! `SIGSTOP`ped. Its lease runs out; a successor takes the lock and writes through the fence.
//! The holder is resumed (`SIGCONT`) and writes with its old token: refused, every time, and
//! every write of the successor applies. Both record their grants and fenced writes (on
//! `CLOCK_MONOTONIC`), and the history checker (`lock_testkit::history`) judges them with the
//! final log: no overlap of valid leases, tokens that grow, and a fenced register that is
//! linearizable.

use std::time::Duration;

use lock_core::{Fence, LockError, Locker};
use lock_postgres::fence;
use lock_testkit::history::record::{self, HISTORY_DIR_VAR, HistoryDir, Recorder};
use lock_testkit::history::{self, FencedWrite, LogEntry, Share, WriteOutcome};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_postgres::Client;

use crate::common;

const URL_VAR: &str = "DISTLOCK_FENCE_URL";
const NAME: &str = "acct";
const ROUNDS: usize = 2;
const SUCCESSOR_WRITES: i64 = 5;
/// The history's process numbers: the holder processes (one per round) and the successor.
const HOLDER: u32 = 1;
const SUCCESSOR: u32 = 2;

/// [`fenced_write`], recorded: sent now, answered accepted, refused, or (any other error) not
/// at all.
async fn recorded_write(
    recorder: &Recorder,
    client: &mut Client,
    who: &str,
    f: &Fence,
) -> Result<(), LockError> {
    let invoke_ns = record::monotonic_ns();
    let result = fenced_write(client, who, f).await;
    let outcome = match &result {
        Ok(()) => WriteOutcome::Accepted {
            at_ns: record::monotonic_ns(),
        },
        Err(LockError::Fenced { .. }) => WriteOutcome::Rejected {
            at_ns: record::monotonic_ns(),
        },
        Err(_) => WriteOutcome::Unknown,
    };
    recorder.write(FencedWrite {
        name: NAME.to_owned(),
        process: recorder.process(),
        token: f.token,
        invoke_ns,
        outcome,
    });
    result
}

/// One fenced write: `BEGIN; SELECT distlock_fence(..); INSERT INTO writes ..; COMMIT`.
async fn fenced_write(client: &mut Client, who: &str, f: &Fence) -> Result<(), LockError> {
    let tx = client.transaction().await.expect("begin");
    fence(&tx, f).await?;
    let token = i64::try_from(f.token).expect("a lease-table token fits int8");
    tx.execute(
        "INSERT INTO writes (who, token) VALUES ($1, $2)",
        &[&who, &token],
    )
    .await
    .expect("write");
    tx.commit().await.expect("commit");
    Ok(())
}

/// Polls (bounded: `limit`) until `sql` (one boolean) answers true.
async fn until(client: &Client, sql: &str, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if client
            .query_one(sql, &[])
            .await
            .expect(sql)
            .get::<_, bool>(0)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
#[ignore = "a holder process of fence_processes"]
async fn holder() {
    let url = std::env::var(URL_VAR).expect("the server's URL");
    let dir = std::env::var(HISTORY_DIR_VAR).expect("the history directory");
    let recorder = Recorder::create(dir.as_ref(), HOLDER).expect("the holder's history");
    let locker = Locker::new(common::unmigrated_at(url.clone()));
    let mut client = common::client(&url).await;
    let requested_ns = record::monotonic_ns();
    let guard = locker
        .lock(NAME)
        .lease(Duration::from_secs(1))
        .wait(Duration::from_secs(30))
        .await
        .expect("the lock");
    let start_ns = record::monotonic_ns();
    let f = guard.fence();
    recorded_write(&recorder, &mut client, "holder", &f)
        .await
        .expect("the holder's first write");
    client
        .execute("INSERT INTO steps VALUES ('wrote')", &[])
        .await
        .expect("step");
    // Paused about here by the parent; resumed after the successor wrote and said `go`.
    assert!(
        until(
            &client,
            "SELECT EXISTS (SELECT FROM steps WHERE step = 'go')",
            Duration::from_secs(60)
        )
        .await,
        "never told to go on"
    );
    // Its lease ran out while it was stopped: the hold ends at its `valid_until`.
    recorder.lease(NAME, &guard, (requested_ns, start_ns), Share::Exclusive);
    let outcome = match recorded_write(&recorder, &mut client, "holder", &f).await {
        Ok(()) => "accepted".to_owned(),
        Err(LockError::Fenced { token, current, .. }) if token == f.token => {
            format!("refused current={current}")
        }
        Err(err) => format!("error {err}"),
    };
    client
        .execute("INSERT INTO steps VALUES ($1)", &[&outcome])
        .await
        .expect("outcome");
    drop(guard);
}

fn signal(child: &tokio::process::Child, sig: Signal) {
    let pid = child.id().expect("the holder runs");
    kill(Pid::from_raw(i32::try_from(pid).expect("pid")), sig).expect("signal the holder");
}

/// One round: a holder process paused past its lease, a successor that writes, the holder's
/// late write. Returns the successor's token.
/// Both sides record into `recorder` and the directory `dir`.
async fn round(
    url: &str,
    admin: &mut Client,
    locker: &Locker,
    recorder: &Recorder,
    dir: &HistoryDir,
) -> u64 {
    admin.batch_execute("TRUNCATE steps").await.expect("reset");
    let mut child = lock_testkit::spawn_test_process(
        &lock_testkit::child_test!(holder),
        &[(URL_VAR, url.to_owned()), dir.env()],
    )
    .expect("the holder process");
    let wrote = "SELECT EXISTS (SELECT FROM steps WHERE step = 'wrote')";
    assert!(
        until(admin, wrote, Duration::from_secs(60)).await,
        "the holder never wrote"
    );
    signal(&child, Signal::SIGSTOP);

    // The holder's lease (1 s) runs out while it is stopped; the successor takes the lock.
    let requested_ns = record::monotonic_ns();
    let guard = locker
        .lock(NAME)
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(30))
        .await
        .expect("the successor's lock");
    let start_ns = record::monotonic_ns();
    let successor = guard.fence();
    for _ in 0..SUCCESSOR_WRITES {
        recorded_write(recorder, admin, "successor", &successor)
            .await
            .expect("the successor's write");
    }
    admin
        .execute("INSERT INTO steps VALUES ('go')", &[])
        .await
        .expect("go");
    signal(&child, Signal::SIGCONT);
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the holder ends")
        .expect("its status");
    assert!(status.success(), "the holder process failed: {status}");
    let outcome: String = admin
        .query_one(
            "SELECT step FROM steps WHERE step NOT IN ('wrote', 'go')",
            &[],
        )
        .await
        .expect("the holder's outcome")
        .get(0);
    assert_eq!(outcome, format!("refused current={}", successor.token));
    recorder.lease(NAME, &guard, (requested_ns, start_ns), Share::Exclusive);
    guard.release().await.expect("released");
    successor.token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_is_refused_and_the_successors_writes_all_apply() {
    let server = common::server();
    let locker = Locker::new(common::lock(&server).await);
    let mut admin = common::client(&server.url()).await;
    admin
        .batch_execute(
            "CREATE TABLE writes (seq int8 GENERATED ALWAYS AS IDENTITY, who text NOT NULL,
                 token int8 NOT NULL);
             CREATE TABLE steps (step text NOT NULL);",
        )
        .await
        .expect("tables");
    let dir = HistoryDir::new().expect("the history directory");
    let recorder = Recorder::create(dir.path(), SUCCESSOR).expect("the successor's history");
    for _ in 0..ROUNDS {
        round(&server.url(), &mut admin, &locker, &recorder, &dir).await;
    }
    // Per round: the holder's first write and the successor's five; none of the late ones.
    let rows = admin
        .query("SELECT who, token FROM writes ORDER BY seq", &[])
        .await
        .expect("writes");
    let writes: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let holders = writes.iter().filter(|w| w.0 == "holder").count();
    let successors = writes.iter().filter(|w| w.0 == "successor").count();
    assert_eq!(holders, ROUNDS, "{writes:?}");
    assert_eq!(
        i64::try_from(successors).ok(),
        Some(SUCCESSOR_WRITES * i64::try_from(ROUNDS).expect("small")),
        "{writes:?}"
    );
    assert!(
        writes.windows(2).all(|w| w[0].1 <= w[1].1),
        "tokens out of order: {writes:?}"
    );
    let mut recorded = dir.read().expect("the histories");
    let log = writes.iter().map(|(who, token)| LogEntry {
        token: u64::try_from(*token).expect("a positive token"),
        process: if who == "holder" { HOLDER } else { SUCCESSOR },
    });
    recorded.logs.insert(NAME.to_owned(), log.collect());
    let verdict = history::check(&recorded);
    assert_eq!(
        verdict.registers.first().map(|r| r.ops),
        Some(ROUNDS * 7 + 1)
    );
    assert!(
        verdict.violations().is_empty(),
        "{:?}",
        verdict.violations()
    );
}
