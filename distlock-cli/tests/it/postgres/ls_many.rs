//! `ls` over 10,000 held locks of the lease table (and as many released rows, which are not
//! locks) lists every one of them with a fixed number of statements, whatever their number.

use std::time::Instant;

use super::{server, session};
use crate::common::{distlock, json, locks};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_locks() {
    let server = server();
    let url = server.url();
    let (client, _) = session(&url, "filler").await;
    // Held rows as the library writes them (token, fencing token, expiry on the server's
    // clock), and released ones (token null) that `ls` must skip.
    client
        .batch_execute(
            "INSERT INTO distlock_leases (name, token, fencing_token, expires_at)
             SELECT 'job:' || i, lpad(to_hex(i), 32, '0'), 1000000 + i,
                 clock_timestamp() + interval '10 minutes'
             FROM generate_series(0, 9999) AS i;
             INSERT INTO distlock_leases (name, token, fencing_token, expires_at)
             SELECT 'done:' || i, NULL, i, clock_timestamp()
             FROM generate_series(0, 9999) AS i",
        )
        .await
        .expect("fill the lease table");
    let u = url.clone();
    let (doc, only, took) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let doc = json(&distlock(std::slice::from_ref(&u), &["--json", "ls"]));
        let took = started.elapsed();
        (
            doc,
            json(&distlock(&[u], &["--json", "ls", "job:12?"])),
            took,
        )
    })
    .await
    .expect("run");
    let found = locks(&doc);
    assert_eq!(found.len(), 10_000);
    assert!(found.iter().all(|l| l["kind"] == "mutex"));
    let sample = found
        .iter()
        .find(|l| l["name"] == "job:4321")
        .expect("job:4321");
    assert_eq!(sample["token"], format!("{:032x}", 4321));
    assert_eq!(sample["fencing_token"], 1_004_321);
    assert_eq!(locks(&only).len(), 10);
    // A figure for the record, not a limit (the machine may be loaded).
    eprintln!("ls --json over 10,000 held locks took {took:?}");
}
