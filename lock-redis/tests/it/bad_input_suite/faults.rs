//! Rows about a Redis that is down, slow or cut off mid-reply: a typed error within the
//! configured timeouts, no lock left behind, and the same locker works once the fault is gone.
//!
//! Each fault case first makes one lock round trip, so the connection is made and the scripts
//! loaded: the fault then hits the operation under test, not connecting. Leases use
//! [`SHORT_TTL`], because a command held back by a stall or pause may still be delivered after
//! the client gave up, and its grant must expire within the suite's leak check.

use std::time::{Duration, Instant};

use lock_core::{Op, TimeoutPhase};

use super::harness::{Answer, Case, Expect, Outcome, Run, SHORT_TTL, Setup, TIMEOUT};
use super::ops::{extend_then_release, hold, release, try_once, warm_up};

fn row(name: &'static str, input: &'static str, setup: Setup, expect: Expect, run: Run) -> Case {
    super::harness::row(name, input, expect, run).on(setup)
}

const RETRYABLE: Expect = Expect::Backend { retryable: true };
/// The operation's own bound: its timeout, plus slack for a loaded machine.
const WITHIN: Duration = Duration::from_millis(2_500);

/// Runs `op` and checks it answered within [`WITHIN`]: a timeout is no excuse for a hang.
async fn bounded(op: impl std::future::Future<Output = Outcome>) -> Outcome {
    let started = Instant::now();
    let outcome = op.await;
    assert!(
        started.elapsed() < WITHIN,
        "answered after {:?} (timeouts are {TIMEOUT:?})",
        started.elapsed()
    );
    outcome
}

/// Checks that a backend error names the operation it happened in.
fn in_op(outcome: Outcome, ops: &[Op]) -> Outcome {
    if let Err(lock_core::LockError::Backend { op, .. }) = &outcome {
        assert!(ops.contains(op), "unexpected op {op} in {outcome:?}");
    }
    outcome
}

pub(crate) fn cases() -> Vec<Case> {
    vec![
        row(
            "Redis stopped",
            "SIGKILL the server; acquire",
            Setup::Plain,
            RETRYABLE,
            run!(|env| {
                warm_up(&env.subject).await;
                env.server().stop();
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                env.server().start_again().expect("start again");
                in_op(outcome, &[Op::Acquire, Op::Connect])
            }),
        ),
        row(
            "Redis stopped, waiting",
            "SIGKILL the server; acquire with wait(300 ms)",
            Setup::Plain,
            RETRYABLE,
            run!(|env| {
                warm_up(&env.subject).await;
                env.server().stop();
                // A wait retries while it lasts, then reports the backend's error, not a lock timeout.
                let outcome = bounded(async {
                    env.subject
                        .lock("a")
                        .fixed_ttl(SHORT_TTL)
                        .wait(Duration::from_millis(300))
                        .await
                        .map(|_| Answer::Granted)
                })
                .await;
                env.server().start_again().expect("start again");
                outcome
            }),
        ),
        row(
            "Redis paused past the command timeout",
            "SIGSTOP the server; acquire",
            Setup::Plain,
            Expect::Timeout(TimeoutPhase::Command),
            run!(|env| {
                warm_up(&env.subject).await;
                env.server().pause().expect("SIGSTOP");
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                env.server().resume().expect("SIGCONT");
                outcome
            }),
        ),
        row(
            "Redis paused during release",
            "hold; SIGSTOP; release",
            Setup::Plain,
            Expect::Timeout(TimeoutPhase::Command),
            run!(|env| {
                let guard = hold(&env.subject, "a", SHORT_TTL).await;
                env.server().pause().expect("SIGSTOP");
                let outcome = bounded(release(guard)).await;
                env.server().resume().expect("SIGCONT");
                outcome
            }),
        ),
        row(
            "Redis slower than the command timeout",
            "600 ms one-way latency; acquire",
            Setup::Proxied,
            Expect::Timeout(TimeoutPhase::Command),
            run!(|env| {
                warm_up(&env.subject).await;
                env.proxy()
                    .set_latency(TIMEOUT + Duration::from_millis(100));
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                env.proxy().heal();
                outcome
            }),
        ),
        row(
            "network stalled",
            "proxy stalls; acquire",
            Setup::Proxied,
            Expect::Timeout(TimeoutPhase::Command),
            run!(|env| {
                warm_up(&env.subject).await;
                env.proxy().stall();
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                env.proxy().heal();
                outcome
            }),
        ),
        row(
            "network partitioned during extend",
            "hold; partition; extend",
            Setup::Proxied,
            Expect::Timeout(TimeoutPhase::Command),
            run!(|env| {
                let guard = hold(&env.subject, "a", SHORT_TTL).await;
                env.proxy().partition();
                let mut guard = guard;
                let outcome =
                    bounded(async { guard.extend(SHORT_TTL).await.map(|()| Answer::Granted) })
                        .await;
                env.proxy().heal();
                drop(guard); // released in the background; the TTL bounds it anyway
                outcome
            }),
        ),
        row(
            "connection refused",
            "proxy refuses; acquire",
            Setup::Proxied,
            RETRYABLE,
            run!(|env| {
                warm_up(&env.subject).await;
                env.proxy().refuse();
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                env.proxy().heal();
                in_op(outcome, &[Op::Acquire, Op::Connect])
            }),
        ),
        row(
            "connections reset",
            "proxy resets open connections; acquire",
            Setup::Proxied,
            RETRYABLE,
            run!(|env| {
                warm_up(&env.subject).await;
                env.proxy().reset_connections();
                // Let the reset reach the client's socket before the next command goes out.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let outcome = bounded(try_once(env.subject.lock("a").fixed_ttl(SHORT_TTL))).await;
                in_op(outcome, &[Op::Acquire, Op::Connect])
            }),
        ),
        row(
            "connection closed mid-reply to acquire",
            "cut the acquire's reply after 3 bytes",
            Setup::Proxied,
            RETRYABLE,
            run!(|env| {
                warm_up(&env.subject).await;
                env.proxy().cut_next_reply(3);
                // The grant happened on the server; the locker must release it (leak check).
                let outcome = bounded(try_once(
                    env.subject.lock("a").fixed_ttl(Duration::from_secs(30)),
                ))
                .await;
                in_op(outcome, &[Op::Acquire])
            }),
        ),
        row(
            "connection closed mid-reply to release",
            "hold; cut the release's reply after 2 bytes",
            Setup::Proxied,
            RETRYABLE,
            run!(|env| {
                let guard = hold(&env.subject, "a", SHORT_TTL).await;
                env.proxy().cut_next_reply(2);
                in_op(bounded(release(guard)).await, &[Op::Release])
            }),
        ),
        row(
            "connection closed mid-reply to extend",
            "hold; cut the extend's reply after 1 byte",
            Setup::Proxied,
            RETRYABLE,
            run!(|env| {
                let guard = hold(&env.subject, "a", SHORT_TTL).await;
                env.proxy().cut_next_reply(1);
                in_op(
                    bounded(extend_then_release(guard, SHORT_TTL)).await,
                    &[Op::Extend],
                )
            }),
        ),
    ]
}
