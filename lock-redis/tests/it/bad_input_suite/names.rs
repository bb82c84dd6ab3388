//! Rows about what the caller passes: names, TTLs, waits.
//!
//! Names are `&str`, so non-UTF-8 bytes cannot reach the API at all (the type system turns them
//! away); what can arrive is any Unicode, NUL and control characters included, and those rows
//! show they are stored verbatim as binary-safe keys.

use std::time::Duration;

use lock_core::backend::Lock;
use lock_core::{Lease, MAX_NAME_LEN, MAX_TTL, TimeoutPhase, Token};

use super::harness::{Answer, Case, Expect, row};
use super::ops::{extend_then_release, hold, must, owned, release, try_once};

const GRANTED: Expect = Expect::Ok(Answer::Granted);

pub(crate) fn cases() -> Vec<Case> {
    vec![
        row(
            "empty name",
            "\"\"",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("")).await }),
        ),
        row(
            "name one byte over the limit",
            "MAX_NAME_LEN + 1 ASCII bytes",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("n".repeat(MAX_NAME_LEN + 1))).await }),
        ),
        row(
            "name over the limit in bytes, not chars",
            "513 × 'é' = 1,026 bytes",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("é".repeat(513))).await }),
        ),
        row(
            "1,024-byte name works",
            "512 × 'é' = 1,024 bytes = MAX_NAME_LEN",
            GRANTED,
            run!(|env| {
                assert_eq!(MAX_NAME_LEN, 1_024, "the limit the issue names");
                try_once(env.subject.lock("é".repeat(512))).await
            }),
        ),
        row(
            "NUL and control characters",
            "\"a\\0b\\x07\\r\\n\\x1b[0m\"",
            GRANTED,
            run!(|env| {
                let name = "a\0b\x07\r\n\x1b[0m";
                let guard = hold(&env.subject, name, Duration::from_secs(5)).await;
                let stored: Option<String> = redis::cmd("GET")
                    .arg(name)
                    .query_async(&mut env.raw().await)
                    .await
                    .expect("GET");
                assert_eq!(
                    stored.as_deref(),
                    Some(lock_redis::token_value(guard.lease().token()).as_str()),
                    "stored under the exact bytes"
                );
                super::ops::release(guard).await
            }),
        ),
        row(
            "replacement char and astral-plane name",
            "\"\\u{FFFD}ünï🔒\"",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("\u{FFFD}ünï🔒")).await }),
        ),
        row(
            "a lone opening brace",
            "\"{\"",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("{")).await }),
        ),
        row(
            "braces the wrong way round",
            "\"}{\"",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("}{")).await }),
        ),
        row(
            "doubled braces",
            "\"{{a}}\"",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("{{a}}")).await }),
        ),
        row(
            "empty hash tag",
            "\"{}x\"",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("{}x")).await }),
        ),
        row(
            "Lua and RESP injection attempt",
            "\"x') redis.call('FLUSHALL') --\\r\\n*1\\r\\n$8\\r\\nFLUSHALL\"",
            GRANTED,
            run!(|env| {
                env.cmd(&["SET", "canary", "alive"]).await;
                let outcome = try_once(
                    env.subject
                        .lock("x') redis.call('FLUSHALL') --\r\n*1\r\n$8\r\nFLUSHALL\r\n"),
                )
                .await;
                let canary: Option<String> = redis::cmd("GET")
                    .arg("canary")
                    .query_async(&mut env.raw().await)
                    .await
                    .expect("GET");
                assert_eq!(
                    canary.as_deref(),
                    Some("alive"),
                    "the name reached Redis as data only"
                );
                outcome
            }),
        ),
        row(
            "reserved suffix: fencing counter",
            "\"x:distlock-fence\"",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("x:distlock-fence")).await }),
        ),
        row(
            "reserved suffix: release channel",
            "\"{x}:distlock-released\"",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("{x}:distlock-released")).await }),
        ),
        row(
            "TTL zero",
            "ttl(0)",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("a").fixed_ttl(Duration::ZERO)).await }),
        ),
        row(
            "TTL under a millisecond",
            "ttl(999 µs)",
            Expect::InvalidInput,
            run!(|env| {
                try_once(env.subject.lock("a").fixed_ttl(Duration::from_micros(999))).await
            }),
        ),
        row(
            "TTL of 1 ms works and expires",
            "ttl(1 ms), then the same name again",
            GRANTED,
            run!(|env| {
                let first = hold(&env.subject, "a", Duration::from_millis(1)).await;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let second =
                    try_once(env.subject.lock("a").fixed_ttl(Duration::from_secs(5))).await;
                assert!(
                    !must("releasing the expired lease", owned(first.release().await)),
                    "it had expired"
                );
                second
            }),
        ),
        row(
            "TTL of exactly MAX_TTL works",
            "ttl(2^53 - 1 ms)",
            GRANTED,
            run!(|env| { try_once(env.subject.lock("a").fixed_ttl(MAX_TTL)).await }),
        ),
        row(
            "TTL beyond MAX_TTL (beyond exact Lua numbers)",
            "ttl(MAX_TTL + 1 ms)",
            Expect::InvalidInput,
            run!(|env| {
                try_once(
                    env.subject
                        .lock("a")
                        .fixed_ttl(MAX_TTL + Duration::from_millis(1)),
                )
                .await
            }),
        ),
        row(
            "TTL Duration::MAX (beyond PX)",
            "ttl(Duration::MAX)",
            Expect::InvalidInput,
            run!(|env| { try_once(env.subject.lock("a").fixed_ttl(Duration::MAX)).await }),
        ),
        row(
            "wait Duration::MAX: no deadline",
            "wait(Duration::MAX)",
            Expect::Ok(Answer::Granted),
            run!(|env| { release(env.subject.lock("a").wait(Duration::MAX).await?).await }),
        ),
        row(
            "wait overflowing the clock: no deadline",
            "wait(2^63 s)",
            Expect::Ok(Answer::Granted),
            run!(|env| {
                release(
                    env.subject
                        .lock("a")
                        .wait(Duration::from_secs(1 << 63))
                        .await?,
                )
                .await
            }),
        ),
        row(
            "wait shorter than the holder's TTL",
            "held elsewhere; wait(200 ms)",
            Expect::Timeout(TimeoutPhase::Wait),
            run!(|env| {
                let other = env.other();
                let holder = hold(&other, "a", Duration::from_secs(5)).await;
                let outcome = env
                    .subject
                    .lock("a")
                    .wait(Duration::from_millis(200))
                    .await
                    .map(|_| Answer::Granted);
                assert!(must("releasing the holder", owned(holder.release().await)));
                outcome
            }),
        ),
        row(
            "try while held elsewhere",
            "held elsewhere; try_acquire",
            Expect::Ok(Answer::Busy),
            run!(|env| {
                let other = env.other();
                let holder = hold(&other, "a", Duration::from_secs(5)).await;
                let outcome = try_once(env.subject.lock("a")).await;
                assert!(must("releasing the holder", owned(holder.release().await)));
                outcome
            }),
        ),
        row(
            "extend by zero",
            "guard.extend(0)",
            Expect::InvalidInput,
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                extend_then_release(guard, Duration::ZERO).await
            }),
        ),
        row(
            "extend beyond MAX_TTL",
            "guard.extend(Duration::MAX)",
            Expect::InvalidInput,
            run!(|env| {
                let guard = hold(&env.subject, "a", Duration::from_secs(5)).await;
                extend_then_release(guard, Duration::MAX).await
            }),
        ),
        row(
            "backend asked for a zero TTL directly",
            "Lock::try_acquire(ttl = 0)",
            Expect::InvalidInput,
            run!(|env| {
                let lock = env.subject.backend_lock();
                let token = Token::generate().expect("os rng");
                lock.try_acquire("a", token, Duration::ZERO)
                    .await
                    .map(|_| Answer::Granted)
            }),
        ),
        row(
            "backend asked to extend by zero directly",
            "Lock::extend(lease, 0)",
            Expect::InvalidInput,
            run!(|env| {
                let lease = Lease::new(
                    "a",
                    Token::generate().expect("os rng"),
                    1,
                    tokio::time::Instant::now(),
                );
                env.subject
                    .backend_lock()
                    .extend(&lease, Duration::ZERO)
                    .await
                    .map(|_| Answer::Granted)
            }),
        ),
    ]
}
