//! `ls` and `show` on PostgreSQL: every kind of the lease table (held by the library in this
//! process, by other lockers, and by another `distlock run`), an election, and advisory locks
//! held by sessions of their own, with their backend pid, application name and waiters.

use std::time::Duration;

use lock_postgres::advisory_key;

use super::{locker, server, session};
use crate::common::{distlock, eventually, find, hold, json, locks, stderr, stdout};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_and_advisory_locks() {
    let server = server();
    let url = server.url();
    let urls = vec![url.clone()];
    let holder = locker(&url);
    let order = hold(&holder, "order:1").await;
    let token = order.lease().token().to_hex().as_str().to_owned();
    let reader = holder
        .read("report")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("read share");
    // A writer waiting behind the reader (another locker): its waiting record is counted.
    let writers = locker(&url);
    let writing = tokio::spawn(async move {
        let _ = writers
            .write("report")
            .wait(Duration::from_secs(30))
            .acquire()
            .await;
    });
    let permit = holder
        .semaphore("pool", 3)
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("permit");
    let fair = holder
        .fair("turn:1")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .expect("fair lock");
    let queued = locker(&url);
    let queueing = tokio::spawn(async move {
        let _ = queued
            .fair("turn:1")
            .wait(Duration::from_secs(30))
            .acquire()
            .await;
    });
    let leadership = holder
        .elect("leader:1")
        .value("pod-a")
        .lease(Duration::from_secs(30))
        .campaign()
        .await
        .expect("elected");
    // An advisory lock of a session of its own (as sqlx's PgAdvisoryLock takes it), and a
    // second session blocked behind it.
    let key = advisory_key("billing");
    let (billing, billing_pid) = session(&url, "billing-worker").await;
    billing
        .execute("SELECT pg_advisory_lock($1)", &[&key])
        .await
        .expect("advisory lock");
    let (blocked, _) = session(&url, "billing-waiter").await;
    let blocking = tokio::spawn(async move {
        let _ = blocked
            .execute("SELECT pg_advisory_lock($1)", &[&key])
            .await;
    });

    let u = url.clone();
    let (doc, shown_billing, literal, human, free, noted, advisory_human) =
        tokio::task::spawn_blocking(move || {
            let urls = [u.clone()];
            let settled = eventually(Duration::from_secs(10), || {
                let doc = json(&distlock(&urls, &["--json", "ls"]));
                locks(&doc)
                    .iter()
                    .any(|l| l["kind"] == "fair" && l["queued"] == 1)
                    && locks(&doc)
                        .iter()
                        .any(|l| l["kind"] == "read-write" && l["queued"] == 1)
                    && locks(&doc)
                        .iter()
                        .any(|l| l["kind"] == "advisory" && l["waiters"] == 1)
            });
            assert!(settled, "the queued waiters show");
            // A holder described by `run --note`, seen from inside its command.
            let dir = tempfile::tempdir().expect("tempdir");
            let seen = dir.path().join("seen.json");
            let script = format!(
                "{} --url '{u}' --json show job:noted > {}",
                env!("CARGO_BIN_EXE_distlock"),
                seen.display()
            );
            let run = distlock(
                &urls,
                &[
                    "run",
                    "job:noted",
                    "--note",
                    "nightly batch",
                    "--",
                    "sh",
                    "-c",
                    &script,
                ],
            );
            assert!(run.status.success(), "{}", stderr(&run));
            let noted: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&seen).expect("seen")).expect("JSON");
            (
                json(&distlock(&urls, &["--json", "ls"])),
                json(&distlock(&urls, &["--json", "show", "billing"])),
                json(&distlock(&urls, &["--json", "ls", "billing"])),
                stdout(&distlock(&urls, &["show", "order:1"])),
                json(&distlock(&urls, &["--json", "show", "order:404"])),
                noted,
                stdout(&distlock(&urls, &["ls"])),
            )
        })
        .await
        .expect("run distlock");

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
            format!("advisory:{key} advisory"),
            "leader:1 election".to_owned(),
            "order:1 mutex".to_owned(),
            "pool semaphore".to_owned(),
            "report read-write".to_owned(),
            "turn:1 fair".to_owned(),
        ],
        "{doc:#}"
    );

    let mutex = find(&doc, "order:1", "mutex");
    assert_eq!(mutex["token"], token.as_str());
    assert_eq!(mutex["fencing_token"], order.fencing_token());
    let ttl = mutex["ttl_ms"].as_i64().expect("ttl");
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
    assert_eq!(mutex["key"], "distlock_leases");

    let rw = find(&doc, "report", "read-write");
    assert_eq!(rw["readers"]["count"], 1);
    assert_eq!(
        rw["readers"]["shown"][0]["token"],
        reader.lease().token().to_hex().as_str()
    );
    assert_eq!(rw["queued"], 1, "the waiting writer's record");
    assert!(rw["fencing_token"].as_u64().is_some());

    let sem = find(&doc, "pool", "semaphore");
    assert_eq!(sem["permits"]["max"], 3);
    assert_eq!(sem["permits"]["used"], 1);
    assert_eq!(
        sem["permits"]["holders"]["shown"][0]["token"],
        permit.lease().token().to_hex().as_str()
    );
    assert_eq!(sem["permits"]["holders"]["shown"][0]["permits"], 1);

    let fair_row = find(&doc, "turn:1", "fair");
    assert_eq!(fair_row["token"], fair.lease().token().to_hex().as_str());
    assert_eq!(fair_row["fair_queue"].as_array().map(Vec::len), Some(1));

    let election = find(&doc, "leader:1", "election");
    assert_eq!(election["leader"]["value"], "pod-a");
    assert_eq!(election["leader"]["term"], leadership.term());

    let advisory = find(&doc, &format!("advisory:{key}"), "advisory");
    assert_eq!(advisory["holder"]["backend_pid"], billing_pid);
    assert_eq!(advisory["holder"]["application_name"], "billing-worker");
    assert_eq!(advisory["waiters"], 1, "the blocked session");
    assert_eq!(advisory["key"], key.to_string());
    assert!(advisory["holder"]["session_since_ms"].as_u64().is_some());

    // `show NAME` computes the name's key; `ls NAME` (no wildcard) names it too.
    let by_name = find(&shown_billing, "billing", "advisory");
    assert_eq!(by_name["holder"]["backend_pid"], billing_pid);
    assert_eq!(by_name["waiters"], 1);
    assert_eq!(locks(&literal).len(), 1, "{literal:#}");
    assert_eq!(locks(&literal)[0]["name"], "billing");

    // The holder `run --note` described.
    let job = find(&noted, "job:noted", "mutex");
    assert_eq!(job["holder"]["note"], "nightly batch", "{noted:#}");
    assert!(job["holder"]["pid"].as_u64().is_some(), "{noted:#}");
    assert!(job["holder"]["host"].as_str().is_some(), "{noted:#}");

    for part in [token.as_str(), &order.fencing_token().to_string()] {
        assert!(human.contains(part), "{part} in\n{human}");
    }
    for part in [
        format!("backend pid {billing_pid}"),
        "billing-worker".to_owned(),
    ] {
        assert!(
            advisory_human.contains(&part),
            "{part} in\n{advisory_human}"
        );
    }
    assert_eq!(free["held"], false);

    writing.abort();
    queueing.abort();
    blocking.abort();
    drop((order, reader, permit, fair, leadership, billing, urls));
}

/// A database never migrated (advisory locks need no schema): its advisory locks are listed,
/// shared ones once per holding session, and two `int4` keys under their own form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advisory_locks_without_the_schema() {
    let server = lock_testkit::PostgresServer::start().expect("postgres");
    let url = server.url();
    let (a, pid_a) = session(&url, "reader-a").await;
    let (b, pid_b) = session(&url, "reader-b").await;
    for client in [&a, &b] {
        client
            .execute("SELECT pg_advisory_lock_shared(7::int8)", &[])
            .await
            .expect("shared");
    }
    a.execute("SELECT pg_advisory_lock(-1, 42)", &[])
        .await
        .expect("two keys");
    let u = url.clone();
    let (doc, pair, not_held) = tokio::task::spawn_blocking(move || {
        let urls = [u];
        (
            json(&distlock(&urls, &["--json", "ls"])),
            json(&distlock(&urls, &["--json", "show", "advisory:-1,42"])),
            distlock(&urls, &["release", "nothing", "--token", "0"]),
        )
    })
    .await
    .expect("run");
    let shared: Vec<_> = locks(&doc)
        .into_iter()
        .filter(|l| l["name"] == "advisory:7")
        .collect();
    assert_eq!(shared.len(), 2, "{doc:#}");
    assert!(shared.iter().all(|l| l["kind"] == "advisory-shared"));
    let mut pids: Vec<_> = shared
        .iter()
        .filter_map(|l| l["holder"]["backend_pid"].as_i64())
        .collect();
    pids.sort_unstable();
    let mut expected = vec![i64::from(pid_a), i64::from(pid_b)];
    expected.sort_unstable();
    assert_eq!(pids, expected);
    assert_eq!(
        find(&doc, "advisory:-1,42", "advisory")["holder"]["application_name"],
        "reader-a"
    );
    assert_eq!(find(&pair, "advisory:-1,42", "advisory")["key"], "-1,42");
    assert_eq!(not_held.status.code(), Some(1), "{}", stderr(&not_held));
    assert!(
        stderr(&not_held).contains("not held"),
        "{}",
        stderr(&not_held)
    );
    drop((a, b));
}
