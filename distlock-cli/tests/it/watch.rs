//! `watch` refreshes a bounded number of times, shows held locks and counts the releases
//! announced between refreshes, on a single server and on a cluster.

use std::time::Duration;

use lock_core::Locker;

use crate::common::{distlock, hold, locker, stderr, stdout};

/// Two lockers (two processes' worth) taking `name` in turns for `how_long`, each holding it
/// 30 ms: the one that waits marks that it waits, so the other's releases are announced.
/// Returns the number of releases.
async fn contend(urls: &[String], name: &'static str, how_long: Duration) -> usize {
    let turns = |locker: Locker| async move {
        let start = std::time::Instant::now();
        let mut released = 0;
        while start.elapsed() < how_long {
            let guard = hold(&locker, name).await;
            tokio::time::sleep(Duration::from_millis(30)).await;
            guard.release().await.expect("release");
            released += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        released
    };
    let (a, b) = tokio::join!(turns(locker(urls)), turns(locker(urls)));
    a + b
}
use lock_testkit::{RedisCluster, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server_counts_releases() {
    let server = RedisServer::start().expect("redis-server");
    let urls = vec![server.url()];
    let held = hold(&locker(&urls), "held:1").await;
    let u = urls.clone();
    let watching = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &["--json", "watch", "--interval", "1s", "--iterations", "3"],
        )
    });
    // Releases of one name while the watch runs, announced to its waiters.
    let cycles = contend(&urls, "busy:1", Duration::from_millis(2200)).await;
    let out = watching.await.expect("watch");
    assert!(out.status.success(), "{}", stderr(&out));
    let refreshes: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
        .collect();
    assert_eq!(refreshes.len(), 3);
    for r in &refreshes {
        assert!(
            r["locks"]
                .as_array()
                .expect("locks")
                .iter()
                .any(|l| l["name"] == "held:1")
        );
    }
    let seen: f64 = refreshes
        .iter()
        .filter_map(|r| r["releases_per_second"]["busy:1"].as_f64())
        .sum();
    assert!(
        cycles > 5 && seen > 0.0,
        "releases of busy:1 counted: {seen} ({cycles} cycles)"
    );
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_table_and_releases() {
    let cluster = RedisCluster::start().expect("cluster");
    let urls = cluster.urls();
    let locker = locker(&urls);
    let held: Vec<_> = futures::future::join_all((0..5).map(|i| {
        let locker = &locker;
        async move { hold(locker, &format!("node:{i}")).await }
    }))
    .await;
    let hot = hold(&locker, "hot:1").await;
    let u = urls.clone();
    let watching = tokio::task::spawn_blocking(move || {
        distlock(&u, &["watch", "--interval", "1s", "--iterations", "3"])
    });
    tokio::time::sleep(Duration::from_millis(1200)).await;
    hot.release().await.expect("release");
    let out = watching.await.expect("watch");
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for i in 0..5 {
        assert_eq!(text.matches(&format!("node:{i} ")).count(), 3, "{text}");
    }
    let u = urls.clone();
    let json_out = tokio::task::spawn_blocking(move || {
        distlock(
            &u,
            &["--json", "watch", "--interval", "1s", "--iterations", "4"],
        )
    });
    let again = hold(&locker, "hot:1").await; // seen held at the first refresh
    tokio::time::sleep(Duration::from_millis(1100)).await;
    again.release().await.expect("release");
    // Releases after the first refresh, counted by the later ones (refreshes at about 0, 1, 2
    // and 3 s).
    contend(&urls, "hot:1", Duration::from_millis(1500)).await;
    let out = json_out.await.expect("watch");
    assert!(out.status.success(), "{}", stderr(&out));
    let seen: f64 = stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|r| r["releases_per_second"]["hot:1"].as_f64())
        .sum();
    assert!(
        seen > 0.0,
        "releases of hot:1 counted on the cluster: {}",
        stdout(&out)
    );
    // The watch's own subscriptions are not counted as waiters.
    let last: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().last().expect("a refresh")).expect("JSON");
    for lock in last["locks"].as_array().expect("locks") {
        if lock["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("node:"))
        {
            assert_eq!(lock["waiters"], 0, "{lock}");
        }
    }
    drop(held);
}
