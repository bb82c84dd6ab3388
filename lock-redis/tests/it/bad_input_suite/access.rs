//! Rows about reaching Redis with the wrong configuration: credentials, ACL rights, database,
//! URL and timeouts. Each fails with a non-retryable (or input) error at once, and the server
//! stays usable for a correctly configured client.

use std::time::Duration;

use lock_core::Locker;
use lock_redis::RedisLock;

use super::harness::{After, Answer, Case, Env, Expect, Outcome, Run, Setup, lock_at};
use super::ops::try_once;

fn row(name: &'static str, input: &'static str, setup: Setup, expect: Expect, run: Run) -> Case {
    super::harness::row(name, input, expect, run)
        .on(setup)
        .then(After::Server)
}

const FINAL: Expect = Expect::Backend { retryable: false };

/// Locks as `url` waiting up to 10 s: a final error must come at once, not after the wait.
async fn lock_as(url: &str) -> Outcome {
    let started = std::time::Instant::now();
    let outcome = Locker::new(lock_at(url))
        .lock("a")
        .wait(Duration::from_secs(10))
        .await
        .map(|guard| {
            drop(guard);
            Answer::Granted
        });
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "gave up at once rather than retrying for the whole wait: {:?}",
        started.elapsed()
    );
    outcome
}

/// Creates ACL user `weak` (password `pw`) with `rules` and returns its URL.
async fn acl_user(env: &Env, rules: &[&str]) -> String {
    let mut args = vec!["ACL", "SETUSER", "weak", "on", ">pw"];
    args.extend_from_slice(rules);
    env.cmd(&args).await;
    env.url.replace("redis://", "redis://weak:pw@")
}

fn build(builder: lock_redis::RedisLockBuilder) -> Outcome {
    builder.build().map(|_| Answer::Granted)
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        row(
            "wrong password",
            "redis://:wrong@",
            Setup::Password,
            FINAL,
            run!(|env| { lock_as(&env.url.replace("s3cret", "wrong")).await }),
        ),
        row(
            "no password where one is required",
            "redis:// without credentials",
            Setup::Password,
            FINAL,
            run!(|env| { lock_as(&env.url.replace(":s3cret@", "")).await }),
        ),
        row(
            "ACL user without rights",
            "ACL user: -@all +hello +ping, all keys",
            Setup::Plain,
            FINAL,
            run!(|env| {
                let url = acl_user(&env, &["~*", "&*", "-@all", "+hello", "+ping"]).await;
                lock_as(&url).await
            }),
        ),
        row(
            "ACL user outside its key pattern",
            "ACL user: +@all on ~other:* only",
            Setup::Plain,
            FINAL,
            run!(|env| {
                let url = acl_user(&env, &["~other:*", "&*", "+@all"]).await;
                lock_as(&url).await
            }),
        ),
        row(
            "ACL user switched off",
            "ACL user: off",
            Setup::Plain,
            FINAL,
            run!(|env| {
                let url = acl_user(&env, &["~*", "+@all", "off"]).await;
                lock_as(&url).await
            }),
        ),
        row(
            "database index out of range",
            "redis://…/99 (16 databases)",
            Setup::Plain,
            FINAL,
            run!(|env| { lock_as(&format!("{}99", env.url)).await }),
        ),
        row(
            "unparsable URL",
            "\"not a url\"",
            Setup::Plain,
            Expect::InvalidInput,
            run!(|_env| { build(RedisLock::builder().url("not a url")) }),
        ),
        row(
            "URL of another scheme",
            "http://127.0.0.1:1/",
            Setup::Plain,
            Expect::InvalidInput,
            run!(|_env| { build(RedisLock::builder().url("http://127.0.0.1:1/")) }),
        ),
        row(
            "zero command timeout",
            "command_timeout(0)",
            Setup::Plain,
            Expect::InvalidInput,
            run!(|env| {
                build(
                    RedisLock::builder()
                        .url(env.url.as_str())
                        .command_timeout(Duration::ZERO),
                )
            }),
        ),
        row(
            "zero fence retention",
            "fence_retention(0)",
            Setup::Plain,
            Expect::InvalidInput,
            run!(|env| {
                build(
                    RedisLock::builder()
                        .url(env.url.as_str())
                        .fence_retention(Duration::ZERO),
                )
            }),
        ),
        row(
            "right password works",
            "redis://:s3cret@ (control row)",
            Setup::Password,
            Expect::Ok(Answer::Granted),
            run!(|env| { try_once(env.subject.lock("a")).await }),
        ),
    ]
}
