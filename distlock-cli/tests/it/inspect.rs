//! `ls` and `show` describe locks of every kind — holder token, TTL, last fencing token,
//! waiters, holder metadata, readers, permits — and never list a lock's own derived keys (notes
//! included) as locks; on a single server and on a cluster.

use std::time::Duration;

use lock_testkit::{RedisCluster, RedisServer};

use crate::common::{
    distlock, eventually, find, hold, json, locker, locks, query, stdout, token_of,
};

async fn every_kind(urls: Vec<String>) {
    let holder = locker(&urls);
    let order = hold(&holder, "order:1").await;
    let token = token_of(&order);
    // A waiter in another process-like locker (its own pub/sub connection).
    let waiter = locker(&urls);
    let waiting = tokio::spawn(async move {
        let _ = waiter
            .lock("order:1")
            .wait(Duration::from_secs(20))
            .acquire()
            .await;
    });
    let reader = holder
        .read("report")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("read share");
    let permit = holder
        .semaphore("pool", 3)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("permit");
    let _other = hold(&holder, "order:2").await;
    // A fair lock with a second process queued behind its holder.
    let fair = holder
        .fair("turn:1")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("fair lock");
    let queued = locker(&urls);
    let queueing = tokio::spawn(async move {
        let _ = queued
            .fair("turn:1")
            .wait(Duration::from_secs(20))
            .acquire()
            .await;
    });
    // Holder metadata as a grant writes it, in the note beside it (token, fencing token, the
    // description): shown when its token is the holder's, ignored when it is stale (another
    // token's note, left by a lock released since: notes outlive their grants).
    let described = serde_json::json!({
        "token": token, "host": "web-1", "pid": 4242, "label": "checkout",
        "since_ms": 1_700_000_000_000u64, "note": "order batch"
    });
    let _: () = query(
        &urls,
        redis::cmd("SET")
            .arg("{order:1}:distlock-note")
            .arg(format!("{token}\n{}\n{described}", order.fencing_token())),
    );
    let stale =
        serde_json::json!({ "token": "dl:00000000000000000000000000000000", "host": "old" });
    let _: () = query(
        &urls,
        redis::cmd("SET")
            .arg("{order:2}:distlock-note")
            .arg(format!("dl:00000000000000000000000000000000\n1\n{stale}")),
    );
    // A note left by a lock released since is not a lock either.
    let _: () = query(
        &urls,
        redis::cmd("SET")
            .arg("{gone:1}:distlock-note")
            .arg("dl:00000000000000000000000000000000\n7\npod-b"),
    );

    let urls_c = urls.clone();
    let waited = tokio::task::spawn_blocking(move || {
        eventually(Duration::from_secs(10), || {
            let doc = json(&distlock(&urls_c, &["--json", "show", "order:1"]));
            find(&doc, "order:1", "mutex")["waiters"] == 1
        })
    })
    .await
    .expect("poll");
    assert!(
        waited,
        "the waiter shows as a subscriber of the release channel"
    );

    let urls_c = urls.clone();
    let (doc, filtered, shown, human, free, turn) = tokio::task::spawn_blocking(move || {
        let turn = eventually(Duration::from_secs(10), || {
            let doc = json(&distlock(&urls_c, &["--json", "show", "turn:1"]));
            locks(&doc)
                .iter()
                .any(|l| l["kind"] == "fair" && l["queued"] == 1)
        });
        (
            json(&distlock(&urls_c, &["--json", "ls"])),
            json(&distlock(&urls_c, &["--json", "ls", "order:*"])),
            json(&distlock(&urls_c, &["--json", "show", "pool"])),
            stdout(&distlock(&urls_c, &["show", "order:1"])),
            json(&distlock(&urls_c, &["--json", "show", "order:404"])),
            turn,
        )
    })
    .await
    .expect("run distlock");

    let mutex = find(&doc, "order:1", "mutex");
    assert_eq!(mutex["token"], token.as_str());
    assert_eq!(mutex["fencing_token"], order.fencing_token());
    let ttl = mutex["ttl_ms"].as_i64().expect("ttl");
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
    assert_eq!(mutex["holder"]["host"], "web-1");
    assert_eq!(mutex["holder"]["pid"], 4242);
    assert_eq!(
        find(&doc, "order:2", "mutex")["holder"],
        serde_json::Value::Null
    );

    let rw = find(&doc, "report", "read-write");
    assert_eq!(rw["readers"]["count"], 1);
    assert_eq!(
        rw["readers"]["shown"][0]["token"],
        token_of(&reader).as_str()
    );
    let sem = find(&shown, "pool", "semaphore");
    assert_eq!(sem["permits"]["max"], 3);
    assert_eq!(sem["permits"]["used"], 1);
    assert_eq!(
        sem["permits"]["holders"]["shown"][0]["token"],
        token_of(&permit).as_str()
    );

    assert!(turn, "the fair lock shows its queued waiter");
    let fair_row = find(&doc, "turn:1", "fair");
    assert_eq!(fair_row["token"], token_of(&fair).as_str());
    assert_eq!(fair_row["fair_queue"].as_array().map(Vec::len), Some(1));

    // Exactly these locks: no row for a fencing counter, channel, holder or note key.
    let names: Vec<String> = locks(&doc)
        .iter()
        .map(|l| {
            format!(
                "{} {}",
                l["name"].as_str().unwrap_or(""),
                l["kind"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            "order:1 mutex",
            "order:2 mutex",
            "pool semaphore",
            "report read-write",
            "turn:1 fair"
        ],
        "{doc:#}"
    );
    assert_eq!(locks(&filtered).len(), 2, "{filtered:#}");

    for part in [
        token.as_str(),
        "web-1",
        "checkout",
        &order.fencing_token().to_string(),
    ] {
        assert!(human.contains(part), "{part} in\n{human}");
    }
    assert_eq!(free["held"], false);

    waiting.abort();
    queueing.abort();
    drop((order, reader, permit, fair));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    let server = RedisServer::start().expect("redis-server");
    every_kind(vec![server.url()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    let cluster = RedisCluster::start().expect("cluster");
    every_kind(cluster.urls()).await;
}
