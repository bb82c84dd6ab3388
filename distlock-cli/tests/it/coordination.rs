//! Latches and barriers as operators see them: their records (semaphores under derived
//! names) folded into one row each by `ls`, `show`, `/api/locks` and the console, with the
//! count a user would check: count-downs made, parties present, parties lost, open or not.
//! On Redis and PostgreSQL; the console in headless Chromium, where a waiting `distlock run`
//! is named on the row of the lock it waits for.

use std::time::Duration;

use lock_core::{Barrier, BarrierMember, LatchParty, Locker};

use crate::common::{distlock, find, json, locker_for, stdout};
use crate::serve_browser::{Driver, screenshot};
use crate::serve_kit::{Holder, Serve};

/// What the test leaves in the store: the parties and members it still holds.
struct Held {
    _party: LatchParty,
    _members: Vec<tokio::task::JoinHandle<Result<BarrierMember, lock_core::LockError>>>,
}

/// A latch `batch` of 3 with one count-down made, one party present and one lost (its lease
/// of 1 s ended without a count-down), and a barrier `gate` of 3 with 2 members waiting in.
async fn set_up(url: &str) -> Held {
    let lockers: Vec<Locker> = (0..5).map(|_| locker_for(url)).collect();
    let latch = |i: usize| lockers[i].latch("batch", 3).lease(Duration::from_secs(30));
    latch(0).count_down().await.expect("a count-down");
    let party = latch(1).join().await.expect("a party");
    let crashed = lockers[2]
        .latch("batch", 3)
        .lease(Duration::from_secs(1))
        .join()
        .await
        .expect("a party");
    let _kept = crashed.leak();
    let barrier = |i: usize| -> Barrier {
        lockers[i]
            .barrier("gate", 3)
            .lease(Duration::from_secs(30))
            .wait_at_most(Duration::from_secs(60))
    };
    let members = (3..5)
        .map(|i| {
            let barrier = barrier(i);
            tokio::spawn(async move { barrier.enter().await })
        })
        .collect();
    // The crashed party's lease ends; the members have taken their places.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Held {
        _party: party,
        _members: members,
    }
}

/// `ls --json` and `show --json` give one row each, with the counts; `ls` says it in words.
fn check_listing(urls: &[String]) {
    let doc = json(&distlock(urls, &["ls", "--json"]));
    let latch = find(&doc, "batch", "latch");
    let c = &latch["coordination"];
    assert_eq!(
        (
            &c["count"],
            &c["counted_down"],
            &c["present"],
            &c["lost"],
            &c["state"]
        ),
        (&3.into(), &1.into(), &1.into(), &1.into(), &"broken".into()),
        "{latch:#}"
    );
    let barrier = find(&doc, "gate", "barrier");
    let c = &barrier["coordination"];
    assert_eq!(
        (&c["count"], &c["present"], &c["passed"], &c["state"]),
        (&3.into(), &2.into(), &0.into(), &"filling".into()),
        "{barrier:#}"
    );
    let records = doc["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .filter(|l| l["name"].as_str().is_some_and(|n| n.contains(":distlock-")))
        .count();
    assert_eq!(records, 0, "records listed as locks of their own: {doc:#}");
    let text = stdout(&distlock(urls, &["ls"]));
    assert!(
        text.contains("1/3 counted down, 1 present, 1 lost (broken)")
            && text.contains("2/3 in, 0 passed (filling)"),
        "{text}"
    );
    let shown = json(&distlock(urls, &["show", "gate", "--json"]));
    assert_eq!(
        find(&shown, "gate", "barrier")["coordination"]["present"],
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_and_show_fold_latches_and_barriers_on_postgres() {
    let server = crate::postgres::server();
    let url = server.url();
    let _held = set_up(&url).await;
    check_listing(&[url]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_show_and_the_console_fold_latches_and_barriers_on_redis() {
    let redis = lock_testkit::RedisServer::start().expect("redis");
    let urls = vec![redis.url()];
    let _held = set_up(&redis.url()).await;
    check_listing(&urls);
    // A `distlock run` holds job:held and another waits for it: the page names the waiter.
    let _holder = Holder::start(&urls, &["job:held", "--note", "holding"], "job:held");
    let _waiter = Holder {
        child: std::process::Command::new(env!("CARGO_BIN_EXE_distlock"))
            .args(["--url", &redis.url(), "run", "job:held", "--wait", "60s"])
            .args(["--note", "waiting run", "--", "true"])
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_PREFIX")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("a waiting run"),
    };
    let serve = Serve::start(&urls, &["--refresh", "200ms"]);
    let api = serve.json("/api/locks");
    let latch = find(&api, "batch", "latch");
    assert_eq!(
        latch["coordination"]["summary"], "1/3 counted down, 1 present, 1 lost (broken)",
        "{latch:#}"
    );
    let driver = Driver::start();
    let browser = driver.browser().await;
    browser.goto(&serve.url()).await.expect("open the console");
    let mut drawn = serde_json::Value::Null;
    for _ in 0..100 {
        drawn = browser
            .execute(
                "const cell = (kind) => document.querySelector( \
                   '#locks tbody tr[data-kind=\"' + kind + '\"] .coordination'); \
                 const latch = cell('latch'), barrier = cell('barrier'); \
                 const waiter = document.querySelector( \
                   '#locks tbody tr[data-name=\"job:held\"] .waiter'); \
                 return [latch && latch.textContent, latch && latch.className, \
                         barrier && barrier.textContent, waiter && waiter.textContent];",
                vec![],
            )
            .await
            .expect("read the rows");
        if drawn[0].is_string() && drawn[2].is_string() && drawn[3].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        drawn[0], "1/3 counted down, 1 present, 1 lost (broken)",
        "{drawn}"
    );
    assert!(
        drawn[1].as_str().is_some_and(|c| c.contains("broken")),
        "marked broken: {drawn}"
    );
    assert_eq!(drawn[2], "2/3 in, 0 passed (filling)", "{drawn}");
    assert!(
        drawn[3]
            .as_str()
            .is_some_and(|w| w.ends_with("waiting run")),
        "the waiter named on job:held's row: {drawn}"
    );
    screenshot(&browser, "console-coordination").await;
    browser.close().await.expect("close the browser");
}
