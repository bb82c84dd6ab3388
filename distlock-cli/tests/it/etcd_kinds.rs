//! `ls` and `show` on etcd show every kind lock-etcd writes, each taken through `EtcdLock` on a
//! 3-member cluster: a mutex with its holder's note, a fair lock with its queue, a writer with
//! a writer waiting, readers with a writer waiting behind them, a semaphore's holders; and
//! `watch` counts the releases it sees on the prefix.

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{Guard, LockRequest, Locker};
use lock_etcd::EtcdLock;
use lock_testkit::EtcdCluster;

use crate::common::{eventually, find, json, locks, stdout, token_of};
use crate::etcd::{run, urls};

/// Holds what `request` asks for, with a 30 s lease.
async fn hold(request: LockRequest) -> Guard {
    request
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("acquire")
}

/// A waiter on `request` in a task of its own (aborted by the caller).
fn wait_on(request: LockRequest) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = request
            .lease(Duration::from_secs(30))
            .wait(Duration::from_secs(120))
            .acquire()
            .await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_and_show_give_every_kind_with_its_holders() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    let urls = urls(&cluster);
    let lock = EtcdLock::new(cluster.endpoints()).expect("lock");
    let locker = Locker::new(lock.clone());

    let mutex = hold(locker.lock("m")).await;
    let note = br#"{"host":"box-1","pid":4242,"note":"nightly backup","since_ms":1700000000000}"#;
    assert!(lock.annotate(&mutex.lease(), note).await.expect("annotate"));
    let fair = hold(locker.fair("f")).await;
    let fair_waiter = wait_on(locker.fair("f"));
    let writer = hold(locker.write("w")).await;
    let readers = [hold(locker.read("r")).await, hold(locker.read("r")).await];
    let writer_waiting = wait_on(locker.write("r"));
    let permits = [
        hold(locker.semaphore("s", 3).permits(2)).await,
        hold(locker.semaphore("s", 3)).await,
    ];
    let mut listing = serde_json::Value::Null;
    assert!(
        eventually(Duration::from_secs(10), || {
            listing = json(&crate::common::distlock(&urls, &["ls", "--json"]));
            locks(&listing)
                .iter()
                .any(|l| l["name"] == "f" && l["kind"] == "fair")
                && locks(&listing)
                    .iter()
                    .any(|l| l["name"] == "r" && l["queued"] == 1)
        }),
        "the waiters queued: {listing:#}"
    );

    let m = find(&listing, "m", "mutex");
    assert_eq!(m["token"], token_of(&mutex));
    assert_eq!(m["fencing_token"], mutex.fencing_token());
    assert_eq!(m["holder"]["host"], "box-1", "{m:#}");
    assert_eq!(m["holder"]["pid"], 4242);
    assert_eq!(m["holder"]["note"], "nightly backup");

    let f = find(&listing, "f", "fair");
    assert_eq!(f["token"], token_of(&fair));
    assert_eq!(f["queued"], 1, "{f:#}");
    assert_eq!(f["fair_queue"].as_array().map(Vec::len), Some(1));

    let w = find(&listing, "w", "read-write");
    assert_eq!(
        w["token"],
        token_of(&writer),
        "the writer holds the lock key"
    );
    assert_eq!(w["fencing_token"], writer.fencing_token());
    assert_eq!(w["readers"]["count"], 0);

    let r = find(&listing, "r", "read-write");
    assert_eq!(r["token"], serde_json::Value::Null, "no writer");
    assert_eq!(r["readers"]["count"], 2, "{r:#}");
    assert_eq!(r["queued"], 1, "the writer waiting behind the readers");
    let mut tokens: Vec<String> = r["readers"]["shown"]
        .as_array()
        .expect("shown")
        .iter()
        .map(|m| m["token"].as_str().expect("token").to_owned())
        .collect();
    tokens.sort();
    let mut expected: Vec<String> = readers.iter().map(token_of).collect();
    expected.sort();
    assert_eq!(tokens, expected);

    let s = find(&listing, "s", "semaphore");
    assert_eq!(s["permits"]["max"], 3, "{s:#}");
    assert_eq!(s["permits"]["used"], 3);
    assert_eq!(s["permits"]["holders"]["count"], 2);
    assert_eq!(
        s["permits"]["holders"]["shown"][0]["token"],
        token_of(&permits[0]),
        "oldest first"
    );
    assert_eq!(s["permits"]["holders"]["shown"][0]["permits"], 2);
    assert_eq!(
        locks(&listing).len(),
        5,
        "one lock per name and kind: {listing:#}"
    );

    // `show` reads each member's TTL too, and prints the note whole.
    let shown = json(&run(&urls, &["show", "s", "--json"]).await);
    let ttl = shown["locks"][0]["permits"]["holders"]["shown"][1]["ttl_ms"]
        .as_i64()
        .expect("a TTL");
    assert!((1..=30_000).contains(&ttl), "{shown:#}");
    let shown = json(&run(&urls, &["show", "r", "--json"]).await);
    let ttl = shown["locks"][0]["readers"]["shown"][0]["ttl_ms"]
        .as_i64()
        .expect("a TTL");
    assert!((1..=30_000).contains(&ttl), "{shown:#}");
    let table = stdout(&run(&urls, &["show", "m"]).await);
    assert!(
        table.contains("nightly backup") && table.contains("box-1"),
        "{table}"
    );
    let table = stdout(&run(&urls, &["ls"]).await);
    for expected in [
        "3/3 permits, 2 holders",
        "2 readers",
        "box-1, pid 4242",
        "(+1 queued)",
    ] {
        assert!(table.contains(expected), "{expected:?} in {table}");
    }

    fair_waiter.abort();
    writer_waiting.abort();
    for guard in [mutex, fair, writer] {
        guard.release().await.expect("release");
    }
    for guard in readers.into_iter().chain(permits) {
        guard.release().await.expect("release");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_counts_the_releases_on_the_prefix() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    let urls = urls(&cluster);
    let locker = Locker::new(EtcdLock::new(cluster.endpoints()).expect("lock"));
    let _held = hold(locker.lock("busy")).await;
    // Takes and releases "busy:cycle" while `watch` runs.
    let cycling = {
        let locker = locker.clone();
        tokio::spawn(async move {
            for _ in 0..200 {
                let guard = hold(locker.lock("busy:cycle")).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                guard.release().await.expect("release");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let out = run(
        &urls,
        &[
            "--json",
            "watch",
            "--iterations",
            "2",
            "--interval",
            "1s",
            "busy*",
        ],
    )
    .await;
    cycling.abort();
    let text = stdout(&out);
    let last = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .expect("a document per refresh");
    let doc: serde_json::Value = serde_json::from_str(last).expect("JSON lines");
    let rate = doc["releases_per_second"]["busy:cycle"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(rate > 0.0, "releases counted: {doc:#}");
    assert!(
        doc["releases_per_second"].get("busy").is_none(),
        "the held lock was not released: {doc:#}"
    );
}
