//! `ls`, `show`, `release --token` and `run` on `s3://bucket/prefix` URLs, against a SeaweedFS
//! started for the test (lock-testkit's `SeaweedfsServer`), the endpoint and credentials given
//! in the usual AWS variables, the lock taken through `ObjectStoreLock`: the holder is read with
//! its token and fencing token (the object's epoch); a wrong token changes nothing; the
//! holder's token releases the object (kept, without a holder) and the holder's guard finds
//! it lost; `run` takes and gives back a lock.

use std::process::{Command, Output};
use std::time::Duration;

use lock_core::Locker;
use lock_object_store::ObjectStoreLock;
use lock_testkit::{SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY, SeaweedfsServer};

use crate::common::{find, json, stderr, stdout};

/// `distlock --url URL ARGS...` with the server's endpoint and identity in the AWS variables.
async fn run(server: &SeaweedfsServer, url: &str, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_distlock"));
    command
        .arg("--url")
        .arg(url)
        .args(args)
        .env_remove("DISTLOCK_URL")
        .env_remove("DISTLOCK_PREFIX")
        .env("AWS_ENDPOINT_URL", server.endpoint())
        .env("AWS_ACCESS_KEY_ID", SEAWEEDFS_ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SEAWEEDFS_SECRET_KEY)
        .env("AWS_REGION", "us-east-1")
        .stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.output().expect("run distlock"))
        .await
        .expect("run")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_show_release_and_run_on_s3() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    let url = server.url("cli");
    let lock = ObjectStoreLock::builder()
        .url(url.as_str())
        .endpoint(server.endpoint())
        .credentials(SEAWEEDFS_ACCESS_KEY, SEAWEEDFS_SECRET_KEY)
        .region("us-east-1")
        .build()
        .expect("valid configuration");
    let guard = Locker::new(lock.clone())
        .lock("job:nightly")
        .lease(Duration::from_secs(30))
        .await
        .expect("free");
    let token = guard.lease().token().to_hex().as_str().to_owned();

    let listing = json(&run(&server, &url, &["ls", "--json"]).await);
    let found = find(&listing, "job:nightly", "mutex");
    assert_eq!(found["token"], token.as_str(), "{listing}");
    assert_eq!(found["fencing_token"], guard.fencing_token(), "{listing}");
    let shown = json(&run(&server, &url, &["show", "job:nightly", "--json"]).await);
    assert_eq!(shown["held"], true, "{shown}");

    let wrong = run(
        &server,
        &url,
        &[
            "release",
            "job:nightly",
            "--token",
            "00000000000000000000000000000000",
        ],
    )
    .await;
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    let still = lock
        .object("job:nightly")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(still.holder.as_deref(), Some(token.as_str()), "untouched");

    let right = run(
        &server,
        &url,
        &["release", "job:nightly", "--token", &token],
    )
    .await;
    assert!(right.status.success(), "{}", stderr(&right));
    assert!(stdout(&right).contains("released"), "{}", stdout(&right));
    // An object store announces no release: nobody was notified.
    assert!(
        !stdout(&right).contains("waiters notified"),
        "{}",
        stdout(&right)
    );
    let kept = lock
        .object("job:nightly")
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(kept.holder, None, "released, not deleted");
    assert_eq!(kept.epoch, guard.fencing_token(), "the epoch is kept");
    assert!(
        guard.release().await.is_err(),
        "the released holder no longer owns the lock"
    );
    let shown = json(&run(&server, &url, &["show", "job:nightly", "--json"]).await);
    assert_eq!(shown["held"], false, "{shown}");

    let ran = run(&server, &url, &["run", "job:run", "--", "true"]).await;
    assert!(ran.status.success(), "{}", stderr(&ran));
    let after = lock
        .object("job:run")
        .await
        .expect("read")
        .expect("written");
    assert_eq!(after.holder, None, "run released its lock");
    assert!(after.epoch >= 1);
}

/// A wrong secret and a missing bucket are told as such by every subcommand that reads the
/// store: one line naming the remedy, the store's error code rather than its XML answer, the
/// backend failure's exit code, and "read" rather than a lock operation the user never asked
/// for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_and_a_missing_bucket_are_named() {
    let server = SeaweedfsServer::start().expect("start seaweedfs");
    let ours = server.url("cli");
    // A bucket nobody made: SeaweedFS makes one on the first write, so only reads find it
    // missing.
    let missing = "s3://no-such-bucket/cli";
    for args in [&["ls"][..], &["show", "job"]] {
        let mut wrong = Command::new(env!("CARGO_BIN_EXE_distlock"));
        wrong
            .arg("--url")
            .arg(&ours)
            .args(args)
            .env_remove("DISTLOCK_URL")
            .env("AWS_ENDPOINT_URL", server.endpoint())
            .env("AWS_ACCESS_KEY_ID", SEAWEEDFS_ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
            .env("AWS_REGION", "us-east-1")
            .stdin(std::process::Stdio::null());
        let out = tokio::task::spawn_blocking(move || wrong.output().expect("run distlock"))
            .await
            .expect("run");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(69), "{args:?}: {err}");
        assert!(err.contains("refused the credentials"), "{args:?}: {err}");
        assert!(!err.contains('<'), "{args:?}: the store's XML: {err}");
        assert!(err.contains("during read"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");

        let out = run(&server, missing, args).await;
        let err = stderr(&out);
        if args[0] == "show" && out.status.success() {
            // A read of one object in a missing bucket may answer "not found" like an absent
            // object: nothing is held there, which is true.
            continue;
        }
        assert_eq!(out.status.code(), Some(69), "{args:?}: {err}");
        assert!(err.contains("missing"), "{args:?}: {err}");
        assert!(!err.contains('<'), "{args:?}: the store's XML: {err}");
    }
}
