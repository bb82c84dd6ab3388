//! The console's timeline in a real browser (headless Chromium through chromedriver, as
//! `serve_browser.rs`): three `distlock run`s queue for one name and hold it in turn while
//! `serve` sweeps; the page then draws three holds for that name, with its waiting line, and
//! lists it as the most contended. `/api/history` carries the same.

use std::process::{Command, Stdio};
use std::time::Duration;

use lock_testkit::RedisServer;

use crate::serve_browser::{Driver, screenshot};
use crate::serve_kit::Serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timeline_shows_each_hold_and_the_most_contended_name() {
    let redis = RedisServer::start().expect("redis");
    let urls = vec![redis.url()];
    let serve = Serve::start(&urls, &["--refresh", "200ms"]);
    // Three runs at once: one holds the name for 0.8 s, the others wait their turn.
    let runs: Vec<_> = (0..3)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_distlock"))
                .args(["--url", &redis.url(), "run", "job:busy", "--wait", "20s"])
                .args(["--note", &format!("run {i}"), "--", "sleep", "0.8"])
                .env_remove("DISTLOCK_URL")
                .env_remove("DISTLOCK_PREFIX")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("distlock run")
        })
        .collect();
    for mut run in runs {
        let status = tokio::task::spawn_blocking(move || run.wait())
            .await
            .expect("join")
            .expect("wait");
        assert!(status.success());
    }
    // The sweep after the last release (every 200 ms) closes the last hold.
    let busy = |history: &serde_json::Value| -> Vec<serde_json::Value> {
        history["holds"]
            .as_array()
            .expect("holds")
            .iter()
            .filter(|h| h["name"] == "job:busy")
            .cloned()
            .collect()
    };
    let mut history = serve.json("/api/history");
    for _ in 0..50 {
        if busy(&history).iter().all(|h| h["to_ms"].is_u64()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        history = serve.json("/api/history");
    }
    let holds = busy(&history);
    assert_eq!(holds.len(), 3, "{history:#}");
    assert!(
        holds
            .iter()
            .all(|h| h["ended"] == "released" && h["to_ms"].is_u64()),
        "{holds:#?}"
    );
    assert_eq!(history["contended"][0]["name"], "job:busy", "{history:#}");

    let driver = Driver::start();
    let browser = driver.browser().await;
    browser.goto(&serve.url()).await.expect("open the console");
    let mut drawn = serde_json::Value::Null;
    for _ in 0..100 {
        drawn = browser
            .execute(
                "const row = document.querySelector('.tl-row[data-name=\"job:busy\"]'); \
                 const top = document.querySelector('#contended tbody tr[data-name]'); \
                 return [row ? row.querySelectorAll('.hold').length : 0, \
                         row ? row.querySelectorAll('.wait').length : 0, \
                         top ? top.dataset.name : null];",
                vec![],
            )
            .await
            .expect("read the timeline");
        if drawn[0] == 3 && drawn[2] == "job:busy" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(drawn[0], 3, "three holds drawn: {drawn}");
    assert!(
        drawn[1].as_u64().is_some_and(|n| n > 0),
        "the waiting line drawn: {drawn}"
    );
    assert_eq!(drawn[2], "job:busy", "the most contended name: {drawn}");
    screenshot(&browser, "console-timeline").await;
    browser.close().await.expect("close the browser");
}
