//! `watch` on PostgreSQL: held locks on every refresh, and the releases lock-postgres
//! announces (`LISTEN distlock_released`) counted per name between refreshes.

use std::time::Duration;

use super::{locker, server};
use crate::common::{distlock, hold, stderr, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_announced_releases() {
    let server = server();
    let url = server.url();
    let holder = locker(&url);
    let held = hold(&holder, "held:1").await;
    let u = url.clone();
    let watching = tokio::task::spawn_blocking(move || {
        distlock(
            &[u],
            &["--json", "watch", "--interval", "1s", "--iterations", "3"],
        )
    });
    // Releases of one name while the watch runs: each is announced by the library.
    let cycler = locker(&url);
    let started = std::time::Instant::now();
    let mut cycles = 0u32;
    while started.elapsed() < Duration::from_millis(2200) {
        let guard = hold(&cycler, "busy:1").await;
        guard.release().await.expect("release");
        cycles += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = watching.await.expect("watch");
    assert!(out.status.success(), "{}", stderr(&out));
    let refreshes: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON document per line"))
        .collect();
    assert_eq!(refreshes.len(), 3);
    assert!(refreshes.iter().all(|r| {
        r["locks"]
            .as_array()
            .is_some_and(|l| l.iter().any(|l| l["name"] == "held:1"))
    }));
    let counted: f64 = refreshes
        .iter()
        .filter_map(|r| r["releases_per_second"]["busy:1"].as_f64())
        .sum();
    assert!(
        counted > 0.0,
        "{cycles} releases, none counted: {refreshes:#?}"
    );
    drop(held);
}
