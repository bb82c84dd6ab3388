//! `ls`, `show` and `release --token` on `etcd://` URLs, against a 3-member etcd cluster
//! started for the test, with the lock taken through `EtcdLock`: the holder is read with its
//! token, TTL and fencing token (the guard's, which is the key's revision); a wrong token
//! changes nothing; the holder's token deletes the key and the holder's guard finds it lost;
//! every member given, comma separated or one `--url` each; a cluster that is down fails in
//! one line.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use lock_core::Locker;
use lock_etcd::EtcdLock;
use lock_testkit::EtcdCluster;

use crate::common::{distlock, find, json, locks, stderr, stdout, token_of};

/// `etcd://host:port` for each member.
pub(crate) fn urls(cluster: &EtcdCluster) -> Vec<String> {
    cluster
        .endpoints()
        .iter()
        .map(|e| e.replacen("http://", "etcd://", 1))
        .collect()
}

/// Writes a holder of `name` in lock-etcd's layout (key `distlock/` + name, the value, on a
/// lease of its own, put only if the key is absent), as another client could: the put's
/// revision.
async fn hold(client: &mut Client, name: &str, value: &str, ttl_s: i64) -> i64 {
    let lease = client.lease_grant(ttl_s, None).await.expect("lease").id();
    let key = format!("distlock/{name}");
    let txn = Txn::new()
        .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
        .and_then([TxnOp::put(
            key.as_str(),
            value,
            Some(PutOptions::new().with_lease(lease)),
        )]);
    let response = client.txn(txn).await.expect("txn");
    assert!(response.succeeded(), "{name} was free");
    response.header().expect("header").revision()
}

/// `distlock` with one `--url` per member.
fn distlock_repeated(urls: &[String], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    for url in urls {
        command.arg("--url").arg(url);
    }
    command
        .args(args)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_PREFIX")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run distlock")
}

pub(crate) async fn run(urls: &[String], args: &[&str]) -> Output {
    let (urls, args): (Vec<String>, Vec<String>) = (
        urls.to_vec(),
        args.iter().map(|a| (*a).to_owned()).collect(),
    );
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        distlock(&urls, &args)
    })
    .await
    .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_show_and_release_on_a_three_member_cluster() {
    let cluster = EtcdCluster::builder().members(3).start().expect("etcd");
    let urls = urls(&cluster);
    let mut client = Client::connect(cluster.endpoints(), None)
        .await
        .expect("client");
    let locker = Locker::new(EtcdLock::new(cluster.endpoints()).expect("lock"));
    let guard = locker
        .lock("job:nightly")
        .lease(Duration::from_secs(30))
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("acquire");
    let owned = token_of(&guard);
    let token = owned.as_str();
    let fence = i64::try_from(guard.fencing_token()).expect("a revision");
    hold(
        &mut client,
        "job:other",
        "dl:ffffffffffffffffffffffffffffffff",
        30,
    )
    .await;
    // Another client's lock under the same prefix: listed only with --foreign.
    hold(&mut client, "legacy", "some-client-7", 30).await;

    let listing = json(&run(&urls, &["ls", "--json"]).await);
    let lock = find(&listing, "job:nightly", "mutex");
    assert_eq!(lock["token"], token);
    assert_eq!(
        lock["fencing_token"], fence,
        "the fencing token is the put's revision"
    );
    let ttl = lock["ttl_ms"].as_i64().expect("a TTL");
    assert!((1..=30_000).contains(&ttl), "{ttl}");
    assert_eq!(
        locks(&listing).len(),
        2,
        "no foreign lock without --foreign: {listing:#}"
    );
    let only = json(&run(&urls, &["ls", "--json", "job:n*"]).await);
    assert_eq!(locks(&only).len(), 1, "{only:#}");
    let paged = json(&run(&urls, &["ls", "--json", "--count", "1", "--foreign"]).await);
    assert_eq!(locks(&paged).len(), 3, "pages of one key: {paged:#}");
    assert_eq!(find(&paged, "legacy", "foreign")["token"], "some-client-7");

    let table = run(&urls, &["ls"]).await;
    assert!(table.status.success(), "{}", stderr(&table));
    assert!(stdout(&table).contains("job:nightly"), "{}", stdout(&table));
    assert!(stdout(&table).contains(token), "{}", stdout(&table));

    let shown = json(&run(&urls, &["show", "job:nightly", "--json"]).await);
    assert_eq!(shown["held"], true);
    assert_eq!(
        find(&shown, "job:nightly", "mutex")["key"],
        "distlock/job:nightly"
    );

    let wrong = run(
        &urls,
        &[
            "release",
            "job:nightly",
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
    let still = client.get("distlock/job:nightly", None).await.expect("get");
    assert_eq!(still.kvs()[0].value_str().ok(), Some(token), "untouched");
    assert_eq!(still.kvs()[0].mod_revision(), fence, "not rewritten");

    let forced = run(&urls, &["release", "job:nightly", "--force"]).await;
    assert_ne!(forced.status.code(), Some(0));
    assert!(stderr(&forced).contains("terminal"), "{}", stderr(&forced));

    // Every member as its own --url.
    let (u, t) = (urls.clone(), owned.clone());
    let right = tokio::task::spawn_blocking(move || {
        distlock_repeated(&u, &["release", "job:nightly", "--token", &t])
    })
    .await
    .expect("run");
    assert!(right.status.success(), "{}", stderr(&right));
    assert!(stdout(&right).contains("released"), "{}", stdout(&right));
    // etcd's watchers see the delete.
    assert!(
        stdout(&right).contains("waiters notified"),
        "{}",
        stdout(&right)
    );
    let gone = client.get("distlock/job:nightly", None).await.expect("get");
    assert!(gone.kvs().is_empty(), "the key is deleted");
    // The holder learns it at its next renewal, or at its release.
    assert!(
        guard.release().await.is_err(),
        "the released holder no longer owns the lock"
    );
    let shown = json(&run(&urls, &["show", "job:nightly", "--json"]).await);
    assert_eq!(shown["held"], false);
    let again = run(&urls, &["release", "job:nightly", "--token", token]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("not held"), "{}", stderr(&again));

    // With --prefix, names are read under another prefix.
    let elsewhere = json(&run(&urls, &["ls", "--json", "--prefix", "other/"]).await);
    assert!(locks(&elsewhere).is_empty(), "{elsewhere:#}");
}

#[test]
fn a_cluster_that_is_down_fails_in_one_line() {
    // A port nobody listens on: bound, then freed.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let urls = vec![format!("etcd://127.0.0.1:{port}")];
    for args in [
        &["ls"][..],
        &["show", "a"],
        &["release", "a", "--token", "dl:0"],
    ] {
        let started = std::time::Instant::now();
        let out = distlock(&urls, &[&["--connect-timeout", "1s"][..], args].concat());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(69), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
        // Generous: the bound is the connect timeout, not a speed claim.
        assert!(started.elapsed() < Duration::from_secs(20), "{args:?}");
    }
    let bad = distlock(&["etcd://127.0.0.1".into()], &["ls"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    // `run` is offered on etcd too: it fails on the cluster being down, not on the URL.
    let run = distlock(
        &urls,
        &[
            "--connect-timeout",
            "1s",
            "run",
            "a",
            "--wait",
            "0s",
            "--",
            "true",
        ],
    );
    assert_ne!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_ne!(run.status.code(), Some(2), "{}", stderr(&run));
}
