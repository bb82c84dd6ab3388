//! The checker on small hand-made histories of fenced writes: what the fence must refuse and
//! may accept, with and without the final log.

use super::*;

fn write(process: u32, token: u64, invoke_ns: u64, outcome: WriteOutcome) -> FencedWrite {
    FencedWrite {
        name: "n".to_owned(),
        process,
        token,
        invoke_ns,
        outcome,
    }
}

fn ok(at_ns: u64) -> WriteOutcome {
    WriteOutcome::Accepted { at_ns }
}

fn refused(at_ns: u64) -> WriteOutcome {
    WriteOutcome::Rejected { at_ns }
}

fn log(entries: &[(u64, u32)]) -> BTreeMap<String, Vec<LogEntry>> {
    let entries = entries
        .iter()
        .map(|&(token, process)| LogEntry { token, process })
        .collect();
    BTreeMap::from([("n".to_owned(), entries)])
}

fn history(writes: Vec<FencedWrite>, logs: BTreeMap<String, Vec<LogEntry>>) -> History {
    History {
        writes,
        logs,
        ..History::default()
    }
}

fn linearizable(h: &History) -> bool {
    let verdict = check(h);
    assert_eq!(verdict.registers.len(), 1);
    verdict.violations().is_empty()
}

/// A paused holder's late write after its successor's: refused, as the fence must.
#[test]
fn a_refused_stale_write_is_linearizable() {
    let writes = vec![
        write(0, 5, 10, ok(11)),
        write(1, 7, 20, ok(21)),
        write(0, 5, 30, refused(31)),
    ];
    assert!(linearizable(&history(
        writes.clone(),
        log(&[(5, 0), (7, 1)])
    )));
    assert!(linearizable(&history(writes, BTreeMap::new())));
}

/// The same write accepted: the fence let a stale token in.
#[test]
fn an_accepted_stale_write_is_not() {
    let writes = vec![
        write(0, 5, 10, ok(11)),
        write(1, 7, 20, ok(21)),
        write(0, 5, 30, ok(31)),
    ];
    let with_log = history(writes.clone(), log(&[(5, 0), (7, 1), (5, 0)]));
    let verdict = check(&with_log);
    let failed: Vec<_> = verdict.registers_failed().collect();
    assert_eq!(failed.len(), 1);
    assert!(
        failed[0]
            .blocked
            .as_deref()
            .is_some_and(|b| b.contains("token 5") && b.contains("accepted at 31")),
        "{:?}",
        failed[0].blocked
    );
    assert!(!linearizable(&history(writes, BTreeMap::new())));
}

/// Concurrent writes may reach the fence in either order: the larger first refuses the smaller.
#[test]
fn concurrent_writes_take_the_order_the_log_shows() {
    let writes = vec![write(0, 5, 10, refused(40)), write(1, 7, 20, ok(30))];
    assert!(linearizable(&history(writes, log(&[(7, 1)]))));
    // Refused below nothing: the fence had accepted no larger token by then.
    let alone = vec![write(0, 5, 10, refused(40))];
    assert!(!linearizable(&history(alone, log(&[]))));
}

/// The log and the answers must tell one story: an entry nobody was told was accepted, or an
/// accepted write missing from the log, is not linearizable; an unanswered write may be either.
#[test]
fn the_log_must_match_the_answers() {
    let answered = vec![write(0, 5, 10, ok(11))];
    assert!(!linearizable(&history(answered.clone(), log(&[]))));
    assert!(!linearizable(&history(
        answered.clone(),
        log(&[(5, 0), (5, 0)])
    )));
    assert!(!linearizable(&history(answered, log(&[(5, 1)]))));
    let unknown = vec![
        write(0, 5, 10, ok(11)),
        write(0, 6, 12, WriteOutcome::Unknown),
    ];
    assert!(linearizable(&history(unknown.clone(), log(&[(5, 0)]))));
    assert!(linearizable(&history(
        unknown.clone(),
        log(&[(5, 0), (6, 0)])
    )));
    assert!(!linearizable(&history(unknown, log(&[(6, 0), (5, 0)]))));
}

/// An unanswered write may take effect long after its caller gave up: here after a later
/// write of the same token by its holder.
#[test]
fn an_unanswered_write_may_land_late() {
    let writes = vec![
        write(0, 5, 10, WriteOutcome::Unknown),
        write(0, 5, 20, ok(21)),
        write(1, 7, 30, ok(31)),
    ];
    assert!(linearizable(&history(
        writes.clone(),
        log(&[(5, 0), (5, 0), (7, 1)])
    )));
    // ... but never after a larger token: the fence would have refused it.
    assert!(!linearizable(&history(
        writes,
        log(&[(5, 0), (7, 1), (5, 0)])
    )));
}

/// etcd's guarded commit refuses a writer that is no longer the holder, whatever its token.
#[test]
fn a_holder_guard_may_refuse_a_token_the_order_fence_would_take() {
    let writes = vec![write(0, 5, 10, ok(11)), write(0, 5, 20, refused(21))];
    let mut h = history(writes, log(&[(5, 0)]));
    assert!(!linearizable(&h));
    h.rule = FenceRule::Holder;
    assert!(linearizable(&h));
}

/// Exclusion, permits and tokens together: the verdict lists each broken rule.
#[test]
fn every_broken_rule_is_named() {
    let hold = |process, token, start_ns, end_ns| Hold {
        name: "n".to_owned(),
        process,
        token,
        requested_ns: start_ns - 1,
        start_ns,
        end_ns,
        share: Share::Exclusive,
    };
    let h = History {
        holds: vec![hold(0, 9, 10, 100), hold(1, 3, 50, 150)],
        slack_ns: 1,
        ..History::default()
    };
    let verdict = check(&h);
    assert_eq!(verdict.overlaps.len(), 1);
    assert_eq!(
        verdict.token_regressions.len(),
        1,
        "requested after 9 arrived"
    );
    assert_eq!(verdict.violations().len(), 2, "{:?}", verdict.violations());
    let later = History {
        holds: vec![hold(0, 9, 10, 100), hold(1, 3, 150, 250)],
        ..h
    };
    let verdict = check(&later);
    assert_eq!(verdict.token_regressions.len(), 1);
    assert_eq!(verdict.violations().len(), 1, "{:?}", verdict.violations());
}

/// A long history with about eight writes in flight at any time, each accepted at a point
/// inside its window in token order, and refused writes of old tokens among them: the search
/// finds the order in a few steps per operation.
#[test]
fn a_long_concurrent_history_is_linearized_cheaply() {
    let mut rng = fastrand::Rng::with_seed(37);
    let mut writes = Vec::new();
    let mut entries = Vec::new();
    for i in 1..=300_u64 {
        let at = i * 10;
        let (before, after) = (rng.u64(0..40), rng.u64(0..40));
        let process = u32::try_from(i % 8).expect("small");
        writes.push(write(process, i, at - before, ok(at + after)));
        entries.push((i, process));
        if i % 10 == 0 {
            // A stale holder's write of an older token, refused.
            writes.push(write(process, i - 5, at + 1, refused(at + 2 + after)));
        }
    }
    rng.shuffle(&mut writes);
    let h = history(writes, log(&entries));
    let verdict = check(&h);
    let Search::Linearizable { steps } = verdict.registers[0].search else {
        panic!("{:?}", verdict.registers[0]);
    };
    assert_eq!(verdict.registers[0].ops, 331);
    assert!(steps < 20 * 331, "{steps} steps");
}
