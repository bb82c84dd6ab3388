//! Observers on a Redlock of real redis-servers (`Lock::describe_holder`, `Lock::annotate`, and
//! leader election's `Election::leader` / `Election::observe` over them): the term observers
//! read is the leader's own (the Redlock lease's fencing token), terms rise across leaders and
//! hand-overs, a minority of nodes down, paused or holding other keys does not change the
//! answer, and a note never shows with a later grant.

use std::error::Error as _;
use std::pin::Pin;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use lock_core::backend::{Attempt, Lock};
use lock_core::{Election, Leader, LockError, Locker, Token};
use lock_redlock::{MAX_NOTE_BYTES, QuorumNotReached, Redlock};
use lock_testkit::holders;

use crate::common::servers::{FAST, Nodes, Paused, redis_lock, token_hex};

/// The leases of these tests: long enough never to run out by themselves.
const TTL: Duration = Duration::from_secs(10);
/// The nodes share this host's clock: a grant held this long has a smaller token than the
/// next one (README, "Fencing tokens").
const HOLD: Duration = Duration::from_millis(5);
/// The per-node timeout (and release timeout): a paused node costs a round this much. 500 ms:
/// with 200 ms a live node on a loaded machine sometimes missed it too, and a read of a bare
/// quorum then lacked the term and note (seen once as term 0, note "").
const NODE_TIMEOUT: Duration = Duration::from_millis(500);

fn redlock(nodes: &Nodes) -> Redlock {
    nodes.redlock_with(|b| b.node_timeout(NODE_TIMEOUT))
}

/// The election `name` on a Redlock of its own over `nodes` (like another process).
fn election(nodes: &Nodes, name: &str) -> Election {
    Locker::new(redlock(nodes))
        .elect(name)
        .lease(TTL)
        .poll_interval(Duration::from_millis(50))
}

type Changes = Pin<Box<dyn Stream<Item = Result<Option<Leader>, LockError>> + Send>>;

async fn next(changes: &mut Changes) -> Option<Leader> {
    tokio::time::timeout(FAST, changes.next())
        .await
        .expect("the observer's next change in time")
        .expect("the stream goes on")
        .expect("reads")
}

async fn leader(observer: &Election) -> Option<Leader> {
    observer.leader().await.expect("reads")
}

/// Three leaders in turn, then a hand-over to a candidate that waited: `leader()` and
/// `observe()` from another Redlock read each leader's own term and value, `None` after each
/// resignation, and the terms strictly rise.
async fn leaders_in_turn(n: usize) {
    let nodes = Nodes::start(n);
    let observer = election(&nodes, "leader");
    let mut changes: Changes = Box::pin(observer.observe());
    assert!(next(&mut changes).await.is_none(), "nobody leads yet");
    let mut terms = Vec::new();
    for round in 0..3 {
        let value = format!("pod-{round}");
        let leadership = election(&nodes, "leader")
            .value(&value)
            .campaign()
            .await
            .expect("elected");
        let read = leader(&observer).await.expect("a leader");
        assert_eq!(
            read.term(),
            leadership.term(),
            "leader(): the leader's term"
        );
        assert_eq!(read.value_str(), Some(value.as_str()));
        assert!(read.since().is_some() && read.is_recorded());
        let seen = next(&mut changes).await.expect("the new leader");
        assert_eq!(
            seen.term(),
            leadership.term(),
            "observe(): the leader's term"
        );
        assert_eq!(seen.value_str(), Some(value.as_str()));
        terms.push(leadership.term());
        tokio::time::sleep(HOLD).await;
        leadership.resign().await.expect("ours");
        assert!(leader(&observer).await.is_none(), "nobody after resigning");
        assert!(next(&mut changes).await.is_none(), "observe(): nobody");
    }

    // A hand-over: B waits while A leads, and is elected when A resigns.
    let a = election(&nodes, "leader")
        .value("pod-a")
        .campaign()
        .await
        .expect("elected");
    let seen = next(&mut changes).await.expect("A");
    assert_eq!((seen.term(), seen.value_str()), (a.term(), Some("pod-a")));
    let b = election(&nodes, "leader").value("pod-b");
    let waiting = tokio::spawn(async move { b.campaign().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "B elected while A leads");
    tokio::time::sleep(HOLD).await;
    let a_term = a.term();
    a.resign().await.expect("ours");
    let b = tokio::time::timeout(FAST, waiting)
        .await
        .expect("B elected in time")
        .expect("task")
        .expect("elected");
    assert!(b.term() > a_term, "{} after {a_term}", b.term());
    // The observer may or may not catch the moment between them.
    let seen = match next(&mut changes).await {
        Some(seen) => seen,
        None => next(&mut changes).await.expect("B"),
    };
    assert_eq!((seen.term(), seen.value_str()), (b.term(), Some("pod-b")));
    let read = leader(&observer).await.expect("B leads");
    assert_eq!(read.term(), b.term());
    terms.extend([a_term, b.term()]);
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "terms do not strictly rise: {terms:?}"
    );
    b.resign().await.expect("ours");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_and_observe_read_each_leaders_term_over_three_nodes() {
    leaders_in_turn(3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_and_observe_read_each_leaders_term_over_five_nodes() {
    leaders_in_turn(5).await;
}

/// With a minority of the nodes paused (SIGSTOP: as many as `down` names, those without the leader's record first): the leader elected before is still read right,
/// by `leader()` and by a new observer; a new leader elected by the nodes left (its note on a
/// bare quorum) is read right too.
async fn a_minority_paused(n: usize, down: &[usize]) {
    let nodes = Nodes::start(n);
    let observer = election(&nodes, "leader");
    let first = election(&nodes, "leader")
        .value("first")
        .campaign()
        .await
        .expect("elected");
    // The campaign returns once a quorum has the leader's record, which a node beyond it may
    // never get. Pausing a node of a bare quorum would leave too few nodes with the record
    // (read as term 0, note ""): the scenario is a minority paused while a quorum with the
    // record stays, so nodes without it are the ones paused first.
    let down = minority_to_pause(&nodes, "leader", down).await;
    let paused: Vec<Paused<'_>> = down
        .iter()
        .map(|&i| Paused::pause(&nodes.servers[i]))
        .collect();
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (first.term(), Some("first"))
    );
    let mut changes: Changes = Box::pin(observer.observe());
    let seen = next(&mut changes).await.expect("the leader");
    assert_eq!(seen.term(), first.term());

    tokio::time::sleep(HOLD).await;
    let first_term = first.term();
    first.resign().await.expect("ours on the nodes left");
    let second = election(&nodes, "leader")
        .value("second")
        .campaign()
        .await
        .expect("elected by the nodes left");
    assert!(second.term() > first_term);
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (second.term(), Some("second"))
    );
    let seen = match next(&mut changes).await {
        Some(seen) => seen,
        None => next(&mut changes).await.expect("the second leader"),
    };
    assert_eq!(
        (seen.term(), seen.value_str()),
        (second.term(), Some("second"))
    );
    drop(paused);
    // The paused nodes back (holding nothing of the second term, or a stale note): no change.
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (second.term(), Some("second"))
    );
    second.resign().await.expect("ours");
}

/// As many nodes as `down` names, those without a record (note) for `name` first, then the
/// ones `down` names: pausing them leaves a quorum of nodes that hold the record.
async fn minority_to_pause(nodes: &Nodes, name: &str, down: &[usize]) -> Vec<usize> {
    let mut chosen = Vec::with_capacity(down.len());
    for i in 0..nodes.servers.len() {
        let node = redis_lock(&nodes.url(i));
        if holders::holder(&node, name).await.note.is_none() && chosen.len() < down.len() {
            chosen.push(i);
        }
    }
    for &i in down {
        if chosen.len() < down.len() && !chosen.contains(&i) {
            chosen.push(i);
        }
    }
    chosen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_of_three_paused_the_leader_is_still_read() {
    a_minority_paused(3, &[2]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_of_five_paused_the_leader_is_still_read() {
    a_minority_paused(5, &[0, 3]).await;
}

/// A minority node holding another client's key, or another Redlock grant with its own note
/// (a one-node Redlock on it), does not change the answer; another client's keys on a quorum
/// are a holder without a term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_holding_other_keys_does_not_change_the_holder() {
    let nodes = Nodes::start(3);
    let observer = election(&nodes, "leader");
    let foreign = redis_lock(&nodes.url(0));
    let token = Token::generate().expect("rng");
    let Attempt::Acquired(_) = foreign
        .try_acquire("leader", token, TTL)
        .await
        .expect("answers")
    else {
        panic!("node 0 was free");
    };
    let leadership = election(&nodes, "leader")
        .value("pod-a")
        .campaign()
        .await
        .expect("elected by nodes 1 and 2");
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (leadership.term(), Some("pod-a"))
    );
    tokio::time::sleep(HOLD).await;
    leadership.resign().await.expect("ours");
    assert!(
        foreign
            .release(&lock_core::Lease::new(
                "leader",
                token,
                0,
                tokio::time::Instant::now()
            ))
            .await
            .expect("answers")
    );

    // Another Redlock grant, with its note, on node 0 alone.
    let lone = Redlock::builder()
        .node(redis_lock(&nodes.url(0)))
        .build()
        .expect("one node");
    let lone_lease = match lone
        .try_acquire("leader", Token::generate().expect("rng"), TTL)
        .await
        .expect("answers")
    {
        Attempt::Acquired(lease) => lease,
        Attempt::Busy { .. } => panic!("node 0 was free"),
    };
    assert!(lone.annotate(&lone_lease, b"lone").await.expect("writes"));
    let leadership = election(&nodes, "leader")
        .value("pod-b")
        .campaign()
        .await
        .expect("elected by nodes 1 and 2");
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (leadership.term(), Some("pod-b"))
    );
    tokio::time::sleep(HOLD).await;
    leadership.resign().await.expect("ours");
    assert!(
        leader(&observer).await.is_none(),
        "node 0 alone is no holder"
    );
    assert!(lone.release(&lone_lease).await.expect("answers"));

    // Another client's keys on every node: held, with no term and no note.
    let redlock = redlock(&nodes);
    for i in 0..3 {
        let node = redis_lock(&nodes.url(i));
        let token = Token::generate().expect("rng");
        let Attempt::Acquired(_) = node
            .try_acquire("other", token, TTL)
            .await
            .expect("answers")
        else {
            panic!("free");
        };
    }
    holders::a_foreign_holder_has_no_term(&redlock, "other", TTL).await;
}

/// A grant's note is its own: after a release, and after an expiry, the next grant shows no
/// note (and no term until it writes one); a stale lease writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_note_never_shows_with_a_later_grant() {
    let nodes = Nodes::start(3);
    let redlock = redlock(&nodes);
    let locker = Locker::new(redlock.clone());
    for (round, ttl) in [("released", TTL), ("expired", Duration::from_millis(300))] {
        let name = format!("note:{round}");
        let first = locker
            .lock(name.as_str())
            .fixed_ttl(ttl)
            .await
            .expect("free");
        assert!(
            redlock
                .annotate(&first.lease(), b"first")
                .await
                .expect("writes")
        );
        holders::assert_holder(&redlock, &name, first.fencing_token(), Some(b"first")).await;
        tokio::time::sleep(HOLD).await;
        let stale = first.lease();
        if ttl == TTL {
            first.release().await.expect("ours");
        } else {
            tokio::time::sleep(ttl + Duration::from_millis(100)).await;
            drop(first);
        }
        holders::assert_no_holder(&redlock, &name).await;
        let second = locker
            .lock(name.as_str())
            .fixed_ttl(TTL)
            .await
            .expect("free");
        assert!(second.fencing_token() > stale.fencing_token());
        // Held by a grant that wrote no note: no term to tell, and never the first's note.
        holders::assert_holder(&redlock, &name, 0, None).await;
        assert!(
            !redlock.annotate(&stale, b"late").await.expect("answers"),
            "a stale lease writes no note"
        );
        holders::assert_holder(&redlock, &name, 0, None).await;
        assert!(
            redlock
                .annotate(&second.lease(), b"second")
                .await
                .expect("writes")
        );
        holders::assert_holder(&redlock, &name, second.fencing_token(), Some(b"second")).await;
        second.release().await.expect("ours");
    }
}

/// What `annotate` writes and `describe_holder` reads: the term is the lease's fencing token,
/// the TTL within the lease's, a renewal changes neither, a second note replaces the first,
/// notes are bounded; on each node the note names the grant without showing its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn annotate_then_describe() {
    let nodes = Nodes::start(3);
    let redlock = redlock(&nodes);
    assert!(redlock.capabilities().holders);
    let locker = Locker::new(redlock.clone());
    holders::assert_no_holder(&redlock, "order:42").await;
    let mut guard = locker.lock("order:42").fixed_ttl(TTL).await.expect("free");
    let unnamed = holders::assert_holder(&redlock, "order:42", 0, None).await;
    assert!(
        unnamed.ttl.is_some_and(|t| t > Duration::ZERO && t <= TTL),
        "{unnamed:?}"
    );
    assert!(
        redlock
            .annotate(&guard.lease(), b"pod-a\nline two")
            .await
            .expect("writes")
    );
    let term = guard.fencing_token();
    let described =
        holders::assert_holder(&redlock, "order:42", term, Some(b"pod-a\nline two")).await;
    assert!(
        described
            .ttl
            .is_some_and(|t| t > Duration::ZERO && t <= TTL),
        "{described:?}"
    );

    // On each node: the node's own reading of the record. `annotate` promises the record on
    // a quorum; a node a loaded machine made miss it gets it in the background for at most
    // one more node timeout, and may never (CI saw one node without it after 5 s). So every
    // node that has it has it whole, and a quorum has it.
    let hex = token_hex(&guard.lease());
    let mut recorded = 0;
    for i in 0..3 {
        let node = redis_lock(&nodes.url(i));
        // Read until it is there (at most 5 s).
        let mut seen = holders::holder(&node, "order:42").await;
        for _ in 0..50 {
            if seen.note.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            seen = holders::holder(&node, "order:42").await;
        }
        let Some(note) = seen.note else {
            continue;
        };
        recorded += 1;
        assert!(note.starts_with(b"distlock-redlock/1 "), "{note:?}");
        assert!(note.ends_with(b"\npod-a\nline two"));
        assert!(
            !note.windows(hex.len()).any(|w| w == hex.as_bytes()),
            "the token shows"
        );
    }
    assert!(recorded >= 2, "the record is on {recorded} of 3 nodes");

    guard.extend(TTL).await.expect("renewed");
    holders::assert_holder(&redlock, "order:42", term, Some(b"pod-a\nline two")).await;
    assert!(
        redlock
            .annotate(&guard.lease(), b"pod-a:9090")
            .await
            .expect("writes")
    );
    holders::assert_holder(&redlock, "order:42", term, Some(b"pod-a:9090")).await;
    holders::notes_are_bounded(&redlock, &guard.lease(), MAX_NOTE_BYTES).await;
    guard.release().await.expect("ours");
    holders::assert_no_holder(&redlock, "order:42").await;
}

/// Two nodes of three down: neither the holder nor a note can be told, and both say why with a
/// quorum error; `leader()` passes it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_down_is_a_quorum_error() {
    let mut nodes = Nodes::start(3);
    let redlock = redlock(&nodes);
    let locker = Locker::new(redlock.clone());
    let guard = locker.lock("job").fixed_ttl(TTL).await.expect("free");
    assert!(
        redlock
            .annotate(&guard.lease(), b"a")
            .await
            .expect("writes")
    );
    nodes.servers[1].stop();
    nodes.servers[2].stop();
    let quorum_error = |answer: &LockError| {
        matches!(
            answer,
            LockError::QuorumNotReached {
                retryable: true,
                ..
            }
        ) && answer
            .source()
            .and_then(|s| s.downcast_ref::<QuorumNotReached>())
            .is_some_and(|q| q.failed == 2)
    };
    let described = redlock.describe_holder("job").await;
    assert!(described.as_ref().is_err_and(quorum_error), "{described:?}");
    let written = redlock.annotate(&guard.lease(), b"b").await;
    assert!(written.as_ref().is_err_and(quorum_error), "{written:?}");
    let read = locker.elect("job").leader().await;
    assert!(read.as_ref().is_err_and(quorum_error), "{read:?}");
    drop(guard);
}

/// A leader elected while node 2 was down: its note is on nodes 0 and 1. Node 2 comes back
/// empty, and a renewal repairs it — key and note, so when node 0 goes down next, nodes 1 and
/// 2 still name the leader's grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repaired_node_gets_the_note_again() {
    let mut nodes = Nodes::start(3);
    nodes.servers[2].stop();
    let observer = election(&nodes, "leader");
    let leadership = election(&nodes, "leader")
        .lease(Duration::from_millis(1_500))
        .value("pod-a")
        .campaign()
        .await
        .expect("elected by nodes 0 and 1");
    nodes.servers[2].start_again().expect("restart empty");
    // The leader renews every 500 ms; each renewal repairs node 2 if it answers.
    let node2 = redis_lock(&nodes.url(2));
    let mut noted = false;
    for _ in 0..100 {
        if let Ok(Some(holder)) = node2.describe_holder("leader").await
            && holder.note.is_some()
        {
            noted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(noted, "node 2 was repaired with the note");
    nodes.servers[0].stop();
    let read = leader(&observer).await.expect("a leader");
    assert_eq!(
        (read.term(), read.value_str()),
        (leadership.term(), Some("pod-a"))
    );
    leadership.resign().await.expect("ours on nodes 1 and 2");
}
