//! What a fenced write costs against the same write unfenced (the crate README, "Fenced
//! writes: cost"): server CPU per call from `INFO commandstats` and throughput from 1 and 32
//! tasks, for `FCALL distlock_fenced_set`, its EVALSHA fallback and a plain `SET`. A
//! measurement, not a check: `#[ignore]`d, run by hand (the README gives the command), and it
//! asserts nothing about time.

use std::time::{Duration, Instant};

use lock_core::Fence;
use lock_redis::RedisFences;
use redis::aio::MultiplexedConnection;

use crate::common::{lock_on, raw, server};

/// Writes per measured run (`DISTLOCK_FENCE_COST_WRITES`, default 20,000).
fn writes() -> u64 {
    std::env::var("DISTLOCK_FENCE_COST_WRITES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000)
}

/// `usec_per_call` of `command` in `INFO commandstats`.
async fn usec_per_call(conn: &mut MultiplexedConnection, command: &str) -> f64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:");
    stats
        .lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|f| f.strip_prefix("usec_per_call="))
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

async fn reset(conn: &mut MultiplexedConnection) {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(conn)
        .await
        .expect("RESETSTAT");
}

#[derive(Clone, Copy, Debug)]
enum Write {
    Plain,
    Fenced,
}

/// `writes` writes from `tasks` tasks at once; writes per second.
async fn run(kind: Write, tasks: u64, fences: &RedisFences, conn: &MultiplexedConnection) -> f64 {
    let per_task = writes() / tasks;
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let (fences, mut conn) = (fences.clone(), conn.clone());
            tokio::spawn(async move {
                let key = format!("cost:{t}");
                for i in 0..per_task {
                    match kind {
                        Write::Fenced => fences
                            .set(&Fence::new(key.as_str(), i + 1), b"value", None)
                            .await
                            .expect("fenced"),
                        Write::Plain => redis::cmd("SET")
                            .arg(&key)
                            .arg("value")
                            .exec_async(&mut conn)
                            .await
                            .expect("SET"),
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    (per_task * tasks) as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: cargo test -p lock-redis --all-features --test it fence_cost -- --ignored --nocapture"]
async fn fence_cost() {
    let server = server();
    let mut conn = raw(&server).await;
    let functions = lock_on(&server).fences();
    functions.load().await.expect("library");
    // A user denied FUNCTION and FCALL: the EVALSHA fallback.
    server
        .command(&[
            "ACL",
            "SETUSER",
            "nofn",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-function",
            "-fcall",
            "-fcall_ro",
        ])
        .expect("ACL");
    let url = server.url().replace("redis://", "redis://nofn:pw@");
    let scripts = lock_redis::RedisLock::builder()
        .url(url)
        .command_timeout(Duration::from_secs(5))
        .build()
        .expect("url")
        .fences();
    scripts.load().await.expect("fallback");
    let cases: [(&str, Write, &RedisFences, &str); 3] = [
        ("SET", Write::Plain, &functions, "set"),
        (
            "FCALL distlock_fenced_set",
            Write::Fenced,
            &functions,
            "fcall",
        ),
        ("EVALSHA fallback", Write::Fenced, &scripts, "evalsha"),
    ];
    println!("| write | server µs/call | 1 task, writes/s | 32 tasks, writes/s |");
    println!("|---|---|---|---|");
    for (name, kind, fences, stat) in cases {
        server.command(&["FLUSHDB"]).expect("FLUSHDB");
        run(kind, 1, fences, &conn).await; // warm up
        server.command(&["FLUSHDB"]).expect("FLUSHDB");
        reset(&mut conn).await;
        let one = run(kind, 1, fences, &conn).await;
        let usec = usec_per_call(&mut conn, stat).await;
        server.command(&["FLUSHDB"]).expect("FLUSHDB");
        let many = run(kind, 32, fences, &conn).await;
        println!("| {name} | {usec:.2} | {one:.0} | {many:.0} |");
    }
}
