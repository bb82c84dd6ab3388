//! The library's warnings reach the operator: `distlock` installs a stderr subscriber, so what
//! lock-redis warns about (here, a `maxmemory-policy` that may evict lock keys) is printed,
//! `-q` silences it, and `RUST_LOG` decides when set.

use std::process::Command;

use lock_testkit::RedisServer;

use crate::common::stderr;

/// `distlock run warned -- true` against `url`, with `flags` before the subcommand.
fn run_true(url: &str, flags: &[&str], rust_log: Option<&str>) -> std::process::Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .args(["--url", url])
        .args(flags)
        .args(["run", "warned", "--", "true"])
        .env_remove("DISTLOCK_URL")
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null());
    if let Some(filter) = rust_log {
        command.env("RUST_LOG", filter);
    }
    command.output().expect("run distlock")
}

#[test]
fn an_evicting_redis_is_warned_about_and_quiet_silences_it() {
    let server = RedisServer::builder()
        .arg("--maxmemory")
        .arg("64mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start()
        .expect("redis-server");
    let url = server.url();

    let warned = run_true(&url, &[], None);
    assert!(warned.status.success(), "{}", stderr(&warned));
    let err = stderr(&warned);
    assert!(
        err.contains("WARN") && err.contains("allkeys-lru") && err.contains("granted again"),
        "the eviction risk is printed on stderr: {err}"
    );

    let quiet = run_true(&url, &["-q"], None);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(stderr(&quiet), "", "-q prints no warning");

    // RUST_LOG decides over the flags: `error` hides the warning even without -q.
    let filtered = run_true(&url, &[], Some("error"));
    assert!(filtered.status.success(), "{}", stderr(&filtered));
    assert!(
        !stderr(&filtered).contains("allkeys-lru"),
        "{}",
        stderr(&filtered)
    );

    // A server that evicts nothing gets no warning.
    let plain = RedisServer::start().expect("redis-server");
    let calm = run_true(&plain.url(), &[], None);
    assert!(calm.status.success(), "{}", stderr(&calm));
    assert!(!stderr(&calm).contains("WARN"), "{}", stderr(&calm));
}
