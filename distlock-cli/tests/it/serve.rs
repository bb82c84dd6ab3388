//! `distlock serve`'s API and metrics against a real Redis: locks held by other processes
//! (`distlock run`, renewed and never released; `run --leader`) and by the library in this
//! process (a fixed-TTL holder that never renews nor releases, a semaphore); the hold ages
//! grow in `/metrics`; one sweep serves concurrent requests; a failing store shows as
//! `up: false` with the last snapshot kept; and the security rules: a non-loopback listener
//! without a token file is refused, POSTs need the page's origin or the bearer token, tokens
//! are masked without the bearer, other hosts are refused. The hung in-process holder also shows
//! in the process's own `distlock_oldest_held_seconds`, as it does in the store's.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_testkit::RedisServer;

use crate::common::{distlock, eventually, stderr, token_of};
use crate::serve_kit::{Holder, Serve, gauge, request};

/// The lock named `name` of `kind` in an `/api/locks` document.
fn item(doc: &serde_json::Value, name: &str, kind: &str) -> Option<serde_json::Value> {
    doc["locks"]
        .as_array()?
        .iter()
        .find(|l| l["name"] == name && l["kind"] == kind)
        .cloned()
}

/// A locker whose grants describe their holder (host, pid, since, `note`).
fn describing_locker(url: &str, note: &str) -> Locker {
    Locker::new(
        RedisLock::builder()
            .url(url.to_owned())
            .holder_note(note)
            .build()
            .expect("lock"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_and_metrics_show_every_holder_and_stuck_holds_grow_old() {
    // The process's own metrics (each test runs in a process of its own under nextest).
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test process");
    let redis = RedisServer::start().expect("redis");
    let urls = vec![redis.url()];
    // Another process: renewed every second, its command hangs, never released.
    let run = Holder::start(
        &urls,
        &[
            "--lease",
            "3s",
            "--note",
            "nightly <b>build</b>",
            "job:stuck",
        ],
        "job:stuck",
    );
    let leader = Holder::start(
        &urls,
        &[
            "--leader",
            "--value",
            "api-1",
            "--lease",
            "3s",
            "elect:main",
        ],
        "elect:main",
    );
    // In this process: a fixed TTL of a minute, never renewed, never released; and a
    // semaphore with 2 of 3 permits taken.
    let locker = describing_locker(&urls[0], "cache rebuild");
    let fixed = locker
        .lock("cache:rebuild")
        .fixed_ttl(Duration::from_secs(60))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("fixed-TTL holder");
    let _permits = locker
        .semaphore("pool:db", 3)
        .permits(2)
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("semaphore");
    // And a read share: the exporter says `read`, the library's word for the kind.
    let _reader = locker
        .read("report:daily")
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("read share");

    let serve = Serve::start(&urls, &["--stuck-after", "1s", "--refresh", "200ms"]);
    let doc = serve.json("/api/locks");
    assert_eq!(doc["backend"], "redis");
    assert_eq!(doc["up"], true);
    assert_eq!(doc["authenticated"], false);

    let job = item(&doc, "job:stuck", "mutex").expect("job:stuck listed");
    assert_eq!(job["holder"]["note"], "nightly <b>build</b>");
    assert_eq!(job["holder"]["pid"], u64::from(run.pid()));
    assert!(
        job["holder"]["host"]
            .as_str()
            .is_some_and(|h| !h.is_empty())
    );
    assert_eq!(job["held_since"], "holder");
    assert!(
        job["ttl_ms"]
            .as_i64()
            .is_some_and(|t| (0..=3000).contains(&t)),
        "{job}"
    );
    assert!(job["fencing_token"].as_u64().is_some_and(|t| t > 0));
    assert_eq!(job["waiters"], 0);
    let masked = job["token"].as_str().expect("token");
    assert!(
        masked.ends_with('…') && masked.len() < 16,
        "masked: {masked}"
    );

    let cache = item(&doc, "cache:rebuild", "mutex").expect("cache:rebuild listed");
    assert_eq!(cache["holder"]["note"], "cache rebuild");
    assert_eq!(cache["holder"]["pid"], u64::from(std::process::id()));
    assert!(
        cache["ttl_ms"]
            .as_i64()
            .is_some_and(|t| t > 50_000 && t <= 60_000)
    );
    assert_eq!(cache["fencing_token"], fixed.fencing_token());

    let pool = item(&doc, "pool:db", "semaphore").expect("pool:db listed");
    assert_eq!(pool["permits"]["used"], 2);
    assert_eq!(pool["permits"]["max"], 3);
    // No description from a semaphore's holders: its age counts from the first sweep.
    assert_eq!(pool["held_since"], "first_seen");
    assert!(pool["ttl_ms"].as_i64().is_some_and(|t| t > 0), "{pool}");
    // Elections are listed apart.
    assert!(item(&doc, "elect:main", "election").is_none());
    let elections = serve.json("/api/elections");
    let election = elections["elections"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["name"] == "elect:main"))
        .cloned()
        .expect("elect:main listed");
    assert_eq!(election["leader"]["value"], "api-1");
    let term = election["leader"]["term"].as_u64().expect("term");
    assert!(term > 0);

    // Past --stuck-after (1 s), both never-released holds are stuck, and grow old.
    std::thread::sleep(Duration::from_millis(1200));
    let first = serve.metrics();
    let doc = serve.json("/api/locks");
    for name in ["job:stuck", "cache:rebuild"] {
        let lock = item(&doc, name, "mutex").expect("still held");
        assert_eq!(lock["stuck"], true, "{lock}");
        assert!(lock["held_for_ms"].as_u64().is_some_and(|h| h >= 1000));
    }
    assert_eq!(gauge(&first, "distlock_store_up", &[]), Some(1.0));
    assert_eq!(
        gauge(
            &first,
            "distlock_store_locks_held",
            &[("kind", "semaphore"), ("lock_prefix", "pool")]
        ),
        Some(1.0)
    );
    assert_eq!(
        gauge(
            &first,
            "distlock_store_locks_held",
            &[("kind", "read"), ("lock_prefix", "report")]
        ),
        Some(1.0)
    );
    assert_eq!(
        gauge(
            &first,
            "distlock_store_permits_held",
            &[("lock_prefix", "pool")]
        ),
        Some(2.0)
    );
    assert_eq!(
        gauge(
            &first,
            "distlock_store_leader_term",
            &[("lock", "elect:main")]
        ),
        Some(term as f64)
    );
    std::thread::sleep(Duration::from_millis(1500));
    let second = serve.metrics();
    for prefix in ["job", "cache"] {
        let labels = [("kind", "mutex"), ("lock_prefix", prefix)];
        let before = gauge(&first, "distlock_store_oldest_held_seconds", &labels).expect(prefix);
        let after = gauge(&second, "distlock_store_oldest_held_seconds", &labels).expect(prefix);
        assert!(
            before >= 1.0 && after >= before + 1.0,
            "{prefix}: {before} then {after}"
        );
    }
    // The same hang in the process's own gauge: the fixed-TTL holder (the only mutex held in
    // this process) is as old as the store says, and still growing.
    let own = || process_oldest(&snapshotter, "mutex").expect("distlock_oldest_held_seconds");
    let early = own();
    std::thread::sleep(Duration::from_millis(1200));
    let later = own();
    let store = gauge(
        &serve.metrics(),
        "distlock_store_oldest_held_seconds",
        &[("kind", "mutex"), ("lock_prefix", "cache")],
    )
    .expect("cache");
    assert!(
        early >= 2.0 && later > early && (later - store).abs() < 3.0,
        "the process says {early} s then {later} s, the store {store} s"
    );
    drop((run, leader, fixed));
}

/// The process's own `distlock_oldest_held_seconds` for `kind`, the largest over its series.
fn process_oldest(snapshotter: &metrics_util::debugging::Snapshotter, kind: &str) -> Option<f64> {
    use metrics_util::debugging::DebugValue;
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == lock_core::metric::OLDEST_HELD_SECONDS
                && key
                    .key()
                    .labels()
                    .any(|l| l.key() == "kind" && l.value() == kind)
        })
        .filter_map(|(.., value)| match value {
            DebugValue::Gauge(g) => Some(g.into_inner()),
            _ => None,
        })
        .reduce(f64::max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sweep_serves_concurrent_requests_and_a_failing_store_keeps_the_last_snapshot() {
    let mut redis = RedisServer::start().expect("redis");
    let urls = vec![redis.url()];
    let locker = crate::common::locker(&urls);
    let _guard = crate::common::hold(&locker, "order:1").await;
    let serve = Serve::start(&urls, &["--refresh", "1h"]);
    let addr = serve.addr;
    let requests: Vec<_> = (0..16)
        .map(|i| {
            std::thread::spawn(move || {
                let path = if i % 2 == 0 { "/api/locks" } else { "/metrics" };
                request(addr, "GET", path, &[], None).status
            })
        })
        .collect();
    for r in requests {
        assert_eq!(r.join().expect("request"), 200);
    }
    assert_eq!(
        gauge(&serve.metrics(), "distlock_store_sweeps_total", &[]),
        Some(1.0),
        "one sweep for every request within --refresh"
    );
    drop(serve);

    let serve = Serve::start(&urls, &["--refresh", "100ms"]);
    assert!(item(&serve.json("/api/locks"), "order:1", "mutex").is_some());
    redis.stop();
    assert!(
        eventually(Duration::from_secs(15), || serve.json("/api/locks")["up"]
            == false),
        "the failure shows"
    );
    let doc = serve.json("/api/locks");
    assert!(
        doc["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
    assert!(
        item(&doc, "order:1", "mutex").is_some(),
        "the last snapshot is kept"
    );
    let metrics = serve.metrics();
    assert_eq!(gauge(&metrics, "distlock_store_up", &[]), Some(0.0));
    // SIGTERM stops it cleanly, store down or not.
    let mut serve = serve;
    let status = serve.terminate().expect("stopped within 10 s");
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_rules() {
    let redis = RedisServer::start().expect("redis");
    let urls = vec![redis.url()];

    // A non-loopback listener without a token file is refused before it binds.
    let out = distlock(&urls, &["serve", "--listen", "0.0.0.0:0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--auth-token-file"),
        "{}",
        stderr(&out)
    );

    let locker = crate::common::locker(&urls);
    let guard = crate::common::hold(&locker, "order:7").await;
    let token = token_of(&guard);
    let body = |token: &str| serde_json::json!({"name": "order:7", "token": token}).to_string();

    // Releasing is off without --allow-release, even from the page's origin.
    let serve = Serve::start(&urls, &[]);
    let origin = format!("http://{}", serve.addr);
    let same_origin: [(&str, &str); 3] = [
        ("Origin", &origin),
        ("Sec-Fetch-Site", "same-origin"),
        ("Content-Type", "application/json"),
    ];
    let reply = request(
        serve.addr,
        "POST",
        "/api/release",
        &same_origin,
        Some(&body(&token)),
    );
    assert_eq!(reply.status, 403, "{}", reply.body);
    drop(serve);

    let serve = Serve::start(&urls, &["--allow-release"]);
    let origin = format!("http://{}", serve.addr);
    let post = |headers: &[(&str, &str)], token: &str| {
        request(
            serve.addr,
            "POST",
            "/api/release",
            headers,
            Some(&body(token)),
        )
        .status
    };
    let json = ("Content-Type", "application/json");
    // No Origin, another site's Origin, a cross-site fetch: refused.
    assert_eq!(post(&[json], &token), 403);
    assert_eq!(
        post(&[json, ("Origin", "http://evil.example")], &token),
        403
    );
    assert_eq!(
        post(
            &[json, ("Origin", &origin), ("Sec-Fetch-Site", "cross-site")],
            &token
        ),
        403
    );
    // Another Host (a DNS name rebound to the loopback): refused, reads too.
    let reply = request(
        serve.addr,
        "GET",
        "/api/locks",
        &[("Host", "evil.example")],
        None,
    );
    assert_eq!(reply.status, 403);
    // Tokens are masked without the bearer.
    let doc = serve.json("/api/locks");
    let shown = item(&doc, "order:7", "mutex").expect("listed")["token"].clone();
    assert_ne!(shown, token.as_str());
    // The page's own origin with a wrong token: nothing released; with the holder's: released.
    assert_eq!(
        post(
            &[json, ("Origin", &origin)],
            "dl:00000000000000000000000000000000"
        ),
        409
    );
    assert!(held(&urls, "order:7"));
    assert_eq!(post(&[json, ("Origin", &origin)], &token), 200);
    assert!(!held(&urls, "order:7"));
    // Headers: a strict CSP on the page, nothing runs from the API.
    let page = serve.get("/");
    let csp = &page.headers["content-security-policy"];
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'sha256-"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"));
    assert_eq!(page.headers["x-content-type-options"], "nosniff");
    drop(serve);

    // With a token file: reads and writes need the bearer; with it, tokens show in full.
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("token");
    let secret = "s3cret-console-token-0123456789";
    std::fs::write(&file, format!("{secret}\n")).expect("write");
    let guard = crate::common::hold(&locker, "order:8").await;
    let serve = Serve::start(
        &urls,
        &[
            "--allow-release",
            "--auth-token-file",
            file.to_str().expect("path"),
        ],
    );
    assert_eq!(serve.get("/api/locks").status, 401);
    assert_eq!(serve.get("/metrics").status, 401);
    let wrong = request(
        serve.addr,
        "GET",
        "/api/locks",
        &[("Authorization", "Bearer nope")],
        None,
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(serve.get("/").status, 200, "the page itself holds no data");
    let bearer = format!("Bearer {secret}");
    let reply = request(
        serve.addr,
        "GET",
        "/api/locks",
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(reply.status, 200);
    let doc: serde_json::Value = serde_json::from_str(&reply.body).expect("JSON");
    assert_eq!(doc["authenticated"], true);
    assert_eq!(
        item(&doc, "order:8", "mutex").expect("listed")["token"],
        token_of(&guard).as_str()
    );
    let release = serde_json::json!({"name": "order:8", "token": token_of(&guard)}).to_string();
    let reply = request(serve.addr, "POST", "/api/release", &[json], Some(&release));
    assert_eq!(reply.status, 401, "no bearer");
    let reply = request(
        serve.addr,
        "POST",
        "/api/release",
        &[json, ("Authorization", &bearer)],
        Some(&release),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!held(&urls, "order:8"));
}

/// Whether `distlock show NAME` finds it held.
fn held(urls: &[String], name: &str) -> bool {
    !crate::common::locks(&crate::common::json(&distlock(
        urls,
        &["--json", "show", name],
    )))
    .is_empty()
}
