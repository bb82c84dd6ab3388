//! `ls` over 10,000 held locks (and their fencing counters, and unrelated keys) finds every
//! one of them, walking the keyspace with SCAN in bounded steps.

use lock_testkit::RedisServer;

use crate::common::{distlock, json, locks, redis_conn};

#[test]
fn ten_thousand_locks() {
    let server = RedisServer::start().expect("redis-server");
    let mut conn = redis_conn(&server.url());
    for chunk in 0..10 {
        let mut pipe = redis::pipe();
        for i in chunk * 1000..(chunk + 1) * 1000 {
            pipe.cmd("SET")
                .arg(format!("job:{i}"))
                .arg(format!("dl:{i:032x}"))
                .arg("PX")
                .arg(600_000)
                .ignore();
            pipe.cmd("SET")
                .arg(format!("{{job:{i}}}:distlock-fence"))
                .arg(1_000_000 + i)
                .ignore();
            pipe.cmd("SET").arg(format!("cache:{i}")).arg("x").ignore();
        }
        let _: () = pipe.query(&mut conn).expect("fill");
    }
    let doc = json(&distlock(
        &[server.url()],
        &["--json", "ls", "--count", "500"],
    ));
    let found = locks(&doc);
    assert_eq!(found.len(), 10_000);
    assert_eq!(
        doc["keys_scanned"].as_u64().map(|n| n >= 30_000),
        Some(true),
        "{}",
        doc["keys_scanned"]
    );
    assert!(
        found
            .iter()
            .all(|l| l["kind"] == "mutex" && l["fencing_token"].as_u64().is_some())
    );
    let sample = found
        .iter()
        .find(|l| l["name"] == "job:4321")
        .expect("job:4321");
    assert_eq!(sample["token"], format!("dl:{:032x}", 4321));
    assert_eq!(sample["fencing_token"], 1_004_321);
    let only = json(&distlock(&[server.url()], &["--json", "ls", "job:12?"]));
    assert_eq!(locks(&only).len(), 10);
}
