//! The lost answer: a grant the store applied whose answer never reached its caller leaves
//! nothing held once the background release has run (issue 46: lock-object-store's release of
//! such a grant compared a fencing token it could not know, and left the name held for a
//! whole lease).

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use super::{Backend, name};

/// The one-way delay between the slow locker and the store: each request reaches the store
/// this late and its answer comes back this late, so a caller that gives up in the second
/// half of a round trip leaves a request the store applied and nobody received.
const LATENCY: Duration = Duration::from_millis(40);
/// How far apart the callers give up: a third of a one-way delay, so that at least two of
/// them give up while the grant's answer travels back.
const STEP: Duration = Duration::from_millis(13);
/// The most callers the sweep starts (a grant of many round trips gets a coarser sweep).
const MOST: u32 = 40;

/// Callers on a locker whose requests and answers are 40 ms late
/// ([`Backend::with_late_answers`]) give up on a grant at moments spread over how long a grant
/// of a fresh name takes through that delay (half as long again, and one delay more), one
/// name each: some give up before their
/// request left, some while it travels, and some after the store applied it while its answer
/// travels back. Half ask for a fixed TTL, half for a renewed lease (the two ways a grant is
/// asked for). Every lease is far longer than the check, so only a release can free a name:
/// once the background releases have run, another locker gets every name.
///
/// # Panics
/// When a name stays held, or when the runner gave the backend no way to delay its answers.
pub async fn lost_answer_leaves_nothing(backend: &Backend, prefix: &str) {
    let slow = backend.late_locker(LATENCY);
    let ttl = backend.patience * 3;
    // The first grant opens the connections, loads the scripts, runs a store's self-probe;
    // the second, of another name (a name granted before may take a shorter path), measures
    // how long a grant takes through the delay once those are done.
    let mut took = Duration::ZERO;
    for warm in ["lost-warm", "lost-measure"] {
        let started = Instant::now();
        let request = slow.lock(name(prefix, warm).as_str()).fixed_ttl(ttl);
        let guard = backend
            .within(
                "a grant through the delay",
                request.wait(backend.patience).into_future(),
            )
            .await
            .expect("free");
        took = started.elapsed();
        guard.release().await.expect("ours");
    }
    // Half as long again and one delay more: the sweep covers a grant slower than the one
    // measured, and every caller after the last one answered in time.
    let span = took * 3 / 2 + LATENCY;
    let callers = u32::try_from(span.as_millis() / STEP.as_millis())
        .unwrap_or(MOST)
        .clamp(6, MOST);
    let step = span / callers;
    let names: Vec<String> = (0..callers)
        .map(|i| name(prefix, &format!("lost-{i}")))
        .collect();
    join_all(names.iter().zip(0..).map(|(name, i)| {
        let slow = &slow;
        async move {
            let request = slow.lock(name.as_str()).wait(backend.patience);
            let request = if i % 2 == 0 {
                request.fixed_ttl(ttl)
            } else {
                request.lease(ttl)
            };
            // The caller gives up: the request is dropped, whatever it reached. One answered
            // in time is released as a caller would.
            if let Ok(answered) = tokio::time::timeout(step * i, request.into_future()).await {
                answered
                    .expect("a free name")
                    .release()
                    .await
                    .expect("ours");
            }
        }
    }))
    .await;

    // The background releases run, through the delay; then every name is free, each taken
    // and given back by a locker on the store directly.
    let deadline = Instant::now() + backend.patience;
    let other = backend.locker();
    let mut held = Vec::new();
    for name in &names {
        let taken = loop {
            let taken = other
                .lock(name.as_str())
                .try_acquire()
                .await
                .expect("answers");
            if taken.is_some() || Instant::now() >= deadline {
                break taken;
            }
            tokio::time::sleep(LATENCY).await;
        };
        match taken {
            Some(guard) => guard.release().await.expect("ours"),
            None => held.push(name.as_str()),
        }
    }
    assert!(
        held.is_empty(),
        "{} of {callers} names whose callers gave up (one every {step:?} over {:?}) were \
         still held {:?} later, by a grant nobody received: {held:?}",
        held.len(),
        span,
        backend.patience,
    );
}
