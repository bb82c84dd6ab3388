//! `release --force` on a terminal: shows the holder's token, releases after `yes`, and
//! leaves the lock alone after any other answer. (`script`, from util-linux's bsdutils, gives
//! the command a pseudo-terminal; without a terminal `--force` is refused, see release.rs.)

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use lock_testkit::RedisServer;

use crate::common::{query, redis_conn};

/// Runs `distlock release NAME --force` on a pseudo-terminal and types `answer` once the
/// question is asked; the exit code and what the terminal showed.
pub(crate) fn force(url: &str, name: &str, answer: &str) -> (Option<i32>, String) {
    let line = format!(
        "{} --url {url} release {name} --force",
        env!("CARGO_BIN_EXE_distlock")
    );
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("script (bsdutils)");
    // The answer is typed after the question is up; a terminal would buffer it anyway.
    std::thread::sleep(Duration::from_millis(800));
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{answer}").expect("type");
    drop(stdin);
    let out = child.wait_with_output().expect("script ends");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn confirmed_on_a_terminal() {
    let server = RedisServer::start().expect("redis-server");
    let url = server.url();
    let urls = [url.clone()];
    let token = "dl:0123456789abcdef0123456789abcdef";
    let _: () = redis::cmd("SET")
        .arg("stuck:1")
        .arg(token)
        .arg("PX")
        .arg(60_000)
        .query(&mut redis_conn(&url))
        .expect("set");

    let (code, screen) = force(&url, "stuck:1", "no");
    assert_eq!(code, Some(1), "{screen}");
    assert!(
        screen.contains(token),
        "the question shows the token: {screen}"
    );
    let held: Option<String> = query(&urls, redis::cmd("GET").arg("stuck:1"));
    assert_eq!(held.as_deref(), Some(token), "left alone after \"no\"");

    let (code, screen) = force(&url, "stuck:1", "yes");
    assert_eq!(code, Some(0), "{screen}");
    let held: Option<String> = query(&urls, redis::cmd("GET").arg("stuck:1"));
    assert_eq!(held, None, "released after \"yes\"");
}
