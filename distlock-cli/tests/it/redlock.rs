//! `ls`, `show` and `release --token` with `--redlock` over three Redis masters, the lock taken
//! through the library's `Redlock`: held by all three, then with one master stopped (still
//! listed: two are a quorum); a key of another token on one master only is not a held lock,
//! and `show` gives it in that master's row.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;
use lock_redlock::Redlock;

use crate::common::{find, json, locks, stderr, stdout, token_of};
use crate::run_backends::{distlock_on, masters};

/// `distlock --redlock --url URLS ARGS...`, off the test's runtime.
async fn redlock(urls: &str, args: &[&str]) -> std::process::Output {
    let (urls, args): (String, Vec<String>) = (
        urls.to_owned(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    );
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        distlock_on(&["--redlock", "--url", &urls], &args)
    })
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_held_lock_is_listed_and_a_minority_key_is_not() {
    let (mut servers, urls) = masters();
    let mut builder = Redlock::builder();
    for (i, server) in servers.iter().enumerate() {
        builder = builder.named_node(
            format!("m{i}"),
            RedisLock::from_url(&server.url()).expect("url"),
        );
    }
    let locker = Locker::new(builder.build().expect("redlock"));
    let guard = locker
        .lock("job:r")
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("acquire");
    let token = token_of(&guard);
    let other = "dl:ffffffffffffffffffffffffffffffff";
    servers[0]
        .command(&["SET", "job:minority", other, "PX", "60000"])
        .expect("a key on one master");

    let listing = json(&redlock(&urls, &["--json", "ls"]).await);
    let lock = find(&listing, "job:r", "mutex");
    assert_eq!(lock["token"], token.as_str());
    assert_eq!(lock["quorum"]["holding"], 3, "{lock:#}");
    assert_eq!(lock["quorum"]["required"], 2);
    assert_eq!(lock["quorum"]["masters"], 3);
    let ttl = lock["ttl_ms"].as_i64().expect("a TTL");
    assert!((1..=30_000).contains(&ttl), "{ttl}");
    assert!(
        lock["fencing_token"].as_u64().expect("a fencing token") >= guard.fencing_token(),
        "the largest of the masters' counters: {lock:#}"
    );
    assert!(lock.get("nodes").is_none(), "per-master rows only in show");
    assert_eq!(locks(&listing).len(), 1, "no minority key: {listing:#}");

    let shown = json(&redlock(&urls, &["--json", "show", "job:minority"]).await);
    assert_eq!(shown["held"], false, "{shown:#}");
    let entry = &shown["locks"][0];
    assert_eq!(entry["kind"], "no-quorum");
    assert_eq!(entry["quorum"]["holding"], 1);
    assert_eq!(entry["nodes"][0]["token"], other);
    assert_eq!(entry["nodes"][0]["agrees"], false);
    assert_eq!(entry["nodes"][1]["token"], serde_json::Value::Null);
    let text = stdout(&redlock(&urls, &["show", "job:minority"]).await);
    assert!(
        text.contains("is not held") && text.contains(other),
        "{text}"
    );
    let text = stdout(&redlock(&urls, &["show", "job:r"]).await);
    assert!(text.contains("3 of 3 masters hold it"), "{text}");

    // One master down: two still hold it, a quorum.
    servers[2].stop();
    let listing = json(&redlock(&urls, &["--json", "ls"]).await);
    let lock = find(&listing, "job:r", "mutex");
    assert_eq!(lock["token"], token.as_str());
    assert_eq!(lock["quorum"]["holding"], 2, "{lock:#}");
    assert_eq!(lock["quorum"]["answered"], 2);
    let shown = json(&redlock(&urls, &["--json", "show", "job:r"]).await);
    let nodes = shown["locks"][0]["nodes"].as_array().expect("rows").clone();
    assert_eq!(nodes.len(), 3, "{shown:#}");
    assert!(
        nodes[2]["error"].is_string(),
        "the stopped master: {shown:#}"
    );
    assert_eq!(nodes[0]["agrees"], true);

    // release --token: a wrong token changes nothing; the holder's releases a quorum.
    let wrong = redlock(
        &urls,
        &[
            "release",
            "job:r",
            "--token",
            "dl:00000000000000000000000000000000",
        ],
    )
    .await;
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("another token"),
        "{}",
        stderr(&wrong)
    );
    let right = redlock(&urls, &["release", "job:r", "--token", &token]).await;
    assert!(right.status.success(), "{}", stderr(&right));
    assert!(stdout(&right).contains("released"), "{}", stdout(&right));
    let gone: Option<String> =
        crate::common::query(&[servers[0].url()], redis::cmd("GET").arg("job:r"));
    assert_eq!(gone, None, "the key is deleted");
    let shown = json(&redlock(&urls, &["--json", "show", "job:r"]).await);
    assert_eq!(shown["held"], false, "{shown:#}");
    assert!(
        guard.release().await.is_err(),
        "the released holder no longer owns the lock"
    );
}
