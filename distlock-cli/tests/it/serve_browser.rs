//! The console in a real browser: a headless Chromium driven through chromedriver (WebDriver,
//! fantoccini), against real stores, with the locks held by other processes (`distlock run`,
//! `run --leader`, and this test binary's `hold_in_another_process` for the kinds the command
//! cannot take). A lock taken after the page loaded shows within 2 s without a reload and a
//! released one goes; the filter, the sort by hold age, a holder's `<script>` note shown as
//! text (and not run); the release form works only with `--allow-release` and the holder's
//! token. chromium and chromedriver come from Debian (`scripts/ensure-chromium.sh`); the
//! driver listens on a free loopback port and is stopped by its PID.
//!
//! A backend is one line in [`BACKENDS`]: how to start it, and the kinds the console must show
//! for it.

use std::io::Read;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use lock_testkit::{EtcdCluster, RedisServer, free_port, spawn_test_process};
use serde_json::{Value, json};

use crate::serve_kit::{Holder, Serve};

/// A store started for the test, kept alive while the test runs.
type Running = Box<dyn std::any::Any>;

/// A backend: its name, how to start it (its URLs), and the kinds shown.
struct Backend {
    name: &'static str,
    start: fn() -> (Running, Vec<String>),
    kinds: &'static [&'static str],
    /// Whether its store reads holders' notes back (the hostile note is then shown).
    notes: bool,
}

/// Every backend the console is tested on (PostgreSQL: one line once its store lands).
const BACKENDS: &[Backend] = &[
    Backend {
        name: "redis",
        start: || {
            let redis = RedisServer::start().expect("redis");
            let url = redis.url();
            (Box::new(redis), vec![url])
        },
        kinds: &["mutex", "read-write", "semaphore", "fair", "election"],
        notes: true,
    },
    Backend {
        name: "etcd",
        start: || {
            let etcd = EtcdCluster::builder().members(1).start().expect("etcd");
            let urls = etcd
                .endpoints()
                .iter()
                .map(|e| e.replacen("http://", "etcd://", 1))
                .collect();
            (Box::new(etcd), urls)
        },
        kinds: &["mutex", "read-write", "semaphore", "fair", "election"],
        notes: true,
    },
    Backend {
        name: "postgres",
        start: || {
            let postgres = crate::postgres::server();
            let url = postgres.url();
            (Box::new(postgres), vec![url])
        },
        kinds: &["mutex", "read-write", "semaphore", "fair", "election"],
        notes: true,
    },
];

/// A holder's note that would run if the page ever parsed data as HTML.
const HOSTILE_NOTE: &str =
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_on_redis() {
    console(&BACKENDS[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_on_etcd() {
    console(&BACKENDS[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_on_postgres() {
    console(&BACKENDS[2]).await;
}

/// Holds the lock `DISTLOCK_TEST_NAME` of kind `DISTLOCK_TEST_KIND` on the store at
/// `DISTLOCK_TEST_URL` (Redis, etcd or PostgreSQL) for two minutes at most: the other process
/// the console sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by the console tests in another process"]
async fn hold_in_another_process() {
    let var = |k: &str| std::env::var(k).expect(k);
    let (url, kind, name) = (
        var("DISTLOCK_TEST_URL"),
        var("DISTLOCK_TEST_KIND"),
        var("DISTLOCK_TEST_NAME"),
    );
    let locker = crate::common::locker_for(&url);
    let lease = Duration::from_secs(10);
    let wait = Duration::from_secs(60);
    let request = match kind.as_str() {
        "read-write" => locker.write(name.as_str()),
        "semaphore" => locker.semaphore(name.as_str(), 5).permits(3),
        "fair" | "fair-waiter" => locker.fair(name.as_str()),
        other => panic!("unknown kind {other}"),
    };
    let _guard = request
        .lease(lease)
        .wait(wait)
        .acquire()
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// The console's checks on one backend.
async fn console(backend: &Backend) {
    let (_store, urls) = (backend.start)();
    let mut holders = Vec::new();
    let mut others = Vec::new();
    for kind in backend.kinds {
        match *kind {
            "mutex" => holders.push(Holder::start(
                &urls,
                &["--lease", "10s", "--note", HOSTILE_NOTE, "job:nightly"],
                "job:nightly",
            )),
            "election" => holders.push(Holder::start(
                &urls,
                &[
                    "--leader",
                    "--value",
                    "scheduler-a",
                    "--lease",
                    "10s",
                    "elect:scheduler",
                ],
                "elect:scheduler",
            )),
            "fair" => {
                others.push(other_process(&urls, "fair", "fair:queue"));
                wait_held(&urls, "fair:queue", "mutex");
                // The second in line makes the queue that shows it as fair.
                others.push(other_process(&urls, "fair-waiter", "fair:queue"));
            }
            kind => others.push(other_process(&urls, kind, &format!("{kind}:one"))),
        }
    }
    for kind in backend.kinds {
        let name = match *kind {
            "mutex" => "job:nightly".to_owned(),
            "election" => "elect:scheduler".to_owned(),
            "fair" => "fair:queue".to_owned(),
            kind => format!("{kind}:one"),
        };
        wait_held(&urls, &name, kind);
    }

    // --refresh 200ms: the 2 s a new lock has to show are the page's 1 s poll plus this.
    let serve = Serve::start(&urls, &["--allow-release", "--refresh", "200ms"]);
    let driver = Driver::start();
    let browser = driver.browser().await;
    browser.goto(&serve.url()).await.expect("open the console");

    // Every kind shows, elections apart.
    let shown = |rows: &Vec<(String, String, u64)>| {
        let mut kinds: Vec<String> = rows.iter().map(|r| r.1.clone()).collect();
        kinds.sort();
        kinds.dedup();
        kinds
    };
    let mut expected: Vec<String> = backend.kinds.iter().map(|k| (*k).to_owned()).collect();
    expected.sort();
    let everything = wait_for(&browser, Duration::from_secs(10), |rows| {
        shown(rows) == expected
    })
    .await;
    assert!(
        everything,
        "{}: kinds shown {:?}",
        backend.name,
        shown(&rows(&browser).await)
    );

    // The hostile note is text on the page, and did not run.
    if backend.kinds.contains(&"mutex") {
        let note = browser
            .execute(
                "const n = document.querySelector('tr[data-name=\"job:nightly\"] .note'); \
                 return [n ? n.textContent : null, window.__pwned === undefined, \
                 document.querySelectorAll('#locks img, #locks script').length];",
                vec![],
            )
            .await
            .expect("note");
        let shown = if backend.notes {
            json!(HOSTILE_NOTE)
        } else {
            Value::Null
        };
        assert_eq!(note, json!([shown, true, 0]), "{}", backend.name);
    }

    // The page as loaded, one picture per backend.
    screenshot(&browser, &format!("console-{}", backend.name)).await;

    // A lock taken after the page loaded shows within 2 s, without a reload; released, it goes.
    let mut late = Holder::start(
        &urls,
        &["--lease", "10s", "--note", "late", "job:late"],
        "job:late",
    );
    let appeared = wait_for(&browser, Duration::from_secs(2), |rows| {
        rows.iter().any(|r| r.0 == "job:late")
    })
    .await;
    assert!(appeared, "{}: job:late shows within 2 s", backend.name);
    late.stop();
    let gone = wait_for(&browser, Duration::from_secs(3), |rows| {
        !rows.iter().any(|r| r.0 == "job:late")
    })
    .await;
    assert!(gone, "{}: job:late goes once released", backend.name);

    // A holder killed under a lock-delay: once its lease is over, its row says until when the
    // name is delayed.
    let mut delayed = Holder::start(
        &urls,
        &["--lease", "1s", "--lock-delay", "60s", "job:delayed"],
        "job:delayed",
    );
    delayed.kill();
    let row = "tr[data-name=\"job:delayed\"]";
    assert!(
        wait_text(&browser, &format!("{row} .delayed-until"), "delayed until").await,
        "{}: a killed holder's row says it is delayed",
        backend.name
    );
    let class = browser
        .execute(
            "return document.querySelector(arguments[0]).className;",
            vec![json!(row)],
        )
        .await
        .expect("the row");
    assert!(
        class.as_str().is_some_and(|c| c.contains("delayed")),
        "{class}"
    );
    screenshot(&browser, &format!("console-delayed-{}", backend.name)).await;

    // The row's Revoke button asks a `distlock run` holder to give its lock up: it stops its
    // command and releases at its next renewal (a third of its 3 s lease), and the row goes.
    let _revocable = Holder::start(&urls, &["--lease", "3s", "job:revocable"], "job:revocable");
    assert!(
        wait_for(&browser, Duration::from_secs(3), |rows| {
            rows.iter().any(|r| r.0 == "job:revocable")
        })
        .await
    );
    click(&browser, "tr[data-name=\"job:revocable\"] .revoke").await;
    assert!(
        wait_text(
            &browser,
            "#release-status",
            "asked the holder of job:revocable"
        )
        .await,
        "{}: the console asked",
        backend.name
    );
    let given_up = wait_for(&browser, Duration::from_secs(6), |rows| {
        !rows.iter().any(|r| r.0 == "job:revocable")
    })
    .await;
    assert!(
        given_up,
        "{}: the revoked holder gave its lock up",
        backend.name
    );

    // Sorted by hold age, oldest first; a click on the header turns it round.
    let ages = |rows: &Vec<(String, String, u64)>| rows.iter().map(|r| r.2).collect::<Vec<_>>();
    let locks = "#locks tbody tr[data-name]";
    let before = ages(&rows_of(&browser, locks).await);
    assert!(
        before.windows(2).all(|w| w[0] >= w[1]),
        "oldest first: {before:?}"
    );
    click(&browser, "#sort-age").await;
    let after = ages(&rows_of(&browser, locks).await);
    assert!(
        after.windows(2).all(|w| w[0] <= w[1]),
        "newest first: {after:?}"
    );

    // The filter keeps the names with its prefix, in both tables.
    let prefix = if backend.kinds.contains(&"election") {
        "elect"
    } else {
        "job"
    };
    type_into(&browser, "#filter", prefix).await;
    let filtered = rows_of(&browser, "tr[data-name]").await;
    assert!(
        !filtered.is_empty() && filtered.iter().all(|r| r.0.starts_with(prefix)),
        "{}: filtered {filtered:?}",
        backend.name
    );
    browser
        .execute(
            "const f = document.getElementById('filter'); f.value = ''; \
             f.dispatchEvent(new Event('input'));",
            vec![],
        )
        .await
        .expect("clear the filter");

    // The release form: a wrong token releases nothing; the holder's token releases it.
    let row = "tr[data-name=\"job:nightly\"]";
    click(&browser, &format!("{row} .release")).await;
    type_into(
        &browser,
        &format!("{row} .release-token"),
        "dl:00000000000000000000000000000000",
    )
    .await;
    click(&browser, &format!("{row} .release-confirm")).await;
    assert!(
        wait_text(&browser, "#release-status", "not released").await,
        "a wrong token is refused"
    );
    assert!(rows(&browser).await.iter().any(|r| r.0 == "job:nightly"));
    let token = store_token(&urls, "job:nightly");
    browser
        .execute(
            "const i = document.querySelector(arguments[0]); i.value = ''; i.focus();",
            vec![json!(format!("{row} .release-token"))],
        )
        .await
        .expect("clear the token");
    type_into(&browser, &format!("{row} .release-token"), &token).await;
    click(&browser, &format!("{row} .release-confirm")).await;
    assert!(wait_text(&browser, "#release-status", "released job:nightly").await);
    let released = wait_for(&browser, Duration::from_secs(5), |rows| {
        !rows.iter().any(|r| r.0 == "job:nightly")
    })
    .await;
    assert!(released, "{}: the released lock goes", backend.name);
    drop(serve);

    // Without --allow-release: no release button, and the page's own POST is refused.
    let serve = Serve::start(&urls, &["--refresh", "500ms"]);
    browser.goto(&serve.url()).await.expect("open the console");
    assert!(
        wait_text(&browser, "#status", "snapshot").await,
        "the page loaded"
    );
    // A fetch that fails outright (the connection refused or reset on a loaded machine) is
    // answered as such instead of leaving the script to time out, and sent again: at most 5
    // times, 200 ms apart. The answer asserted is the server's.
    let mut refused = Value::Null;
    for _ in 0..5 {
        refused = browser
            .execute_async(
                "const done = arguments[arguments.length - 1]; \
                 fetch('/api/release', {method: 'POST', headers: {'Content-Type': 'application/json'}, \
                 body: JSON.stringify({name: 'job:other', token: 'x'})}) \
                 .then(r => done([r.status, document.querySelectorAll('.release').length])) \
                 .catch(e => done(['fetch failed', String(e)]));",
                vec![],
            )
            .await
            .expect("POST from the page");
        if refused[0] != "fetch failed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(refused, json!([403, 0]), "{}", backend.name);

    drop(serve);

    let _bearer_holder = Holder::start(
        &urls,
        &["--lease", "10s", "job:late-bearer"],
        "job:late-bearer",
    );
    // With --auth-token-file: the page asks for the bearer token, then shows the locks with
    // their tokens in full.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("token");
    std::fs::write(&file, "console-bearer-0123456789abcdef\n").expect("write the token");
    let serve = Serve::start(
        &urls,
        &[
            "--refresh",
            "200ms",
            "--auth-token-file",
            file.to_str().expect("path"),
        ],
    );
    browser.goto(&serve.url()).await.expect("open the console");
    assert!(
        wait_text(&browser, "#banner", "bearer token").await,
        "{}",
        backend.name
    );
    type_into(&browser, "#bearer", "console-bearer-0123456789abcdef").await;
    click(&browser, "#bearer-save").await;
    assert!(
        wait_text(&browser, "#status", "authenticated").await,
        "{}",
        backend.name
    );
    let token = store_token(&urls, "job:late-bearer");
    let shown = browser
        .execute(
            "const c = document.querySelector('tr[data-name=\"job:late-bearer\"] code'); \
             return c ? c.textContent : null;",
            vec![],
        )
        .await
        .expect("read the token");
    assert_eq!(shown, json!(token), "{}", backend.name);

    browser.close().await.expect("close the browser");
    drop((holders, others));
}

/// Starts this binary's `hold_in_another_process` holding `name` as `kind`.
fn other_process(urls: &[String], kind: &str, name: &str) -> tokio::process::Child {
    spawn_test_process(
        "serve_browser::hold_in_another_process",
        &[
            ("DISTLOCK_TEST_URL", urls[0].clone()),
            ("DISTLOCK_TEST_KIND", kind.to_owned()),
            ("DISTLOCK_TEST_NAME", name.to_owned()),
        ],
    )
    .expect("start a holder process")
}

/// Waits (bounded) until `distlock ls` lists `name` as `kind`.
fn wait_held(urls: &[String], name: &str, kind: &str) {
    let held = crate::common::eventually(Duration::from_secs(30), || {
        let out = crate::common::distlock(urls, &["--json", "ls"]);
        serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|doc| {
            crate::common::locks(&doc)
                .iter()
                .any(|l| l["name"] == name && l["kind"] == kind)
        })
    });
    assert!(held, "{name} held as {kind}");
}

/// The holder's token of `name`, from the store (`distlock show`).
fn store_token(urls: &[String], name: &str) -> String {
    let doc = crate::common::json(&crate::common::distlock(urls, &["--json", "show", name]));
    crate::common::locks(&doc)[0]["token"]
        .as_str()
        .expect("a token")
        .to_owned()
}

/// The lock rows on the page: name, kind, held for (ms).
async fn rows(browser: &Client) -> Vec<(String, String, u64)> {
    rows_of(
        browser,
        "#locks tbody tr[data-name], #elections tbody tr[data-name]",
    )
    .await
}

/// The rows `selector` finds: name, kind, held for (ms; 0 when not shown).
async fn rows_of(browser: &Client, selector: &str) -> Vec<(String, String, u64)> {
    let value = browser
        .execute(
            "return Array.from(document.querySelectorAll(arguments[0])).map(r => \
             [r.dataset.name, r.dataset.kind, Number(r.dataset.heldFor || 0)]);",
            vec![json!(selector)],
        )
        .await
        .expect("read the rows");
    serde_json::from_value::<Vec<(String, String, u64)>>(value).expect("rows")
}

/// Polls the page's rows every 100 ms until `check` holds, for at most `limit`.
async fn wait_for(
    browser: &Client,
    limit: Duration,
    check: impl Fn(&Vec<(String, String, u64)>) -> bool,
) -> bool {
    let start = Instant::now();
    loop {
        if check(&rows(browser).await) {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits (15 s at most) until the element's text contains `text`.
async fn wait_text(browser: &Client, selector: &str, text: &str) -> bool {
    // Up to 15 s: on a loaded machine the release's round trip (page, `serve`, the store) once
    // took longer than 5 s (a fresh-clone run beside other builds).
    for _ in 0..150 {
        let value = browser
            .execute(
                "const e = document.querySelector(arguments[0]); return e ? e.textContent : '';",
                vec![json!(selector)],
            )
            .await
            .expect("read the text");
        if value.as_str().is_some_and(|t| t.contains(text)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Clicks the element `selector` finds. The page rebuilds its rows at every poll, so an element
/// found just before a poll is gone when clicked ("stale element"): found again, as a user's
/// second click would, at most 20 times.
async fn click(browser: &Client, selector: &str) {
    act(browser, selector, "click", |element| async move {
        element.click().await.map(drop)
    })
    .await;
}

/// Types `text` into the element `selector` finds, as a user would (found again when the page
/// rebuilt it meanwhile, as [`click`]).
async fn type_into(browser: &Client, selector: &str, text: &str) {
    act(browser, selector, "type into", |element| async move {
        element.send_keys(text).await
    })
    .await;
}

/// Finds `selector` and does `what` to it, again when the element went stale in between (the
/// page rebuilds its tables every second; on a loaded machine a find and a click can straddle
/// several rebuilds): tries 100 ms apart for up to 20 s; any other failure fails the test.
async fn act<F, Fut>(browser: &Client, selector: &str, what: &str, action: F)
where
    F: Fn(fantoccini::elements::Element) -> Fut,
    Fut: std::future::Future<Output = Result<(), fantoccini::error::CmdError>>,
{
    let deadline = Instant::now() + Duration::from_secs(20);
    for _ in 0..200 {
        let element = browser
            .find(fantoccini::Locator::Css(selector))
            .await
            .unwrap_or_else(|e| panic!("{selector}: {e}"));
        match action(element).await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline && e.to_string().contains("stale element") => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{what} {selector}: {e}"),
        }
    }
    panic!("{what} {selector}: stale at each of 200 tries");
}

/// chromedriver on a free loopback port, killed by its PID when dropped.
/// With `DISTLOCK_CONSOLE_SCREENSHOT=DIR`, writes the page as it is now to `DIR/NAME.png` (the
/// READMEs' pictures); nothing otherwise.
pub(crate) async fn screenshot(browser: &Client, name: &str) {
    if let Ok(dir) = std::env::var("DISTLOCK_CONSOLE_SCREENSHOT") {
        let png = browser.screenshot().await.expect("screenshot");
        std::fs::write(format!("{dir}/{name}.png"), png).expect("write it");
    }
}

pub(crate) struct Driver {
    child: Child,
    port: u16,
    profile: tempfile::TempDir,
}

impl Driver {
    /// Starts chromedriver (`DISTLOCK_CHROMEDRIVER`, else `chromedriver` on the PATH) and
    /// waits (bounded) until it answers.
    pub(crate) fn start() -> Driver {
        let binary =
            std::env::var("DISTLOCK_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
        let port = free_port();
        let profile = tempfile::tempdir().expect("profile dir");
        // HOME and XDG_CONFIG_HOME in the profile: every process the browser starts (its crash
        // handler too) names this directory, and is found by it when stopped.
        let child = Command::new(&binary)
            .arg(format!("--port={port}"))
            .env("HOME", profile.path())
            .env("XDG_CONFIG_HOME", profile.path())
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{binary}: {e} (bash scripts/ensure-chromium.sh)"));
        let driver = Driver {
            child,
            port,
            profile,
        };
        let up = crate::common::eventually(Duration::from_secs(20), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                use std::io::Write;
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = s.write_all(
                    b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                );
                let mut reply = String::new();
                let _ = s.read_to_string(&mut reply);
                reply.contains("\"ready\"")
            })
        });
        assert!(up, "chromedriver answers on port {port}");
        driver
    }

    /// A headless Chromium session: no sandbox (root), no GPU, nothing fetched from the
    /// network (no QUIC, first-run, background networking, component updates, sync), a fresh
    /// profile.
    pub(crate) async fn browser(&self) -> Client {
        let binary =
            std::env::var("DISTLOCK_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1400,700",
            &format!("--user-data-dir={}", self.profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({ "binary": binary, "args": args }),
        );
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .expect("a Chromium session")
    }
}

impl Drop for Driver {
    /// Kills chromedriver by its PID, then the browser's processes (found by the profile
    /// directory on their command line: they outlive a driver killed mid-session).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mark = self.profile.path().to_string_lossy().into_owned();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<i32>().ok())
            else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&mark) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}
