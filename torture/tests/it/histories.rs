//! The history checker on real recorded histories: it passes the real code's, and fails every
//! broken variant it exists to catch. The histories in `tests/histories/` were recorded by
//! short real runs (debug build, one machine) and are kept as they were written:
//!
//! | directory | recorded with `torture --keep DIR --duration D --scenario S ...` |
//! |---|---|
//! | `holder-pause` | `--scenario holder-pause --duration 7s` (the real code) |
//! | `redis-restart-empty` | `--scenario redis-restart-empty --duration 10s` (the real code) |
//! | `holder-pause-unfenced` | `--scenario holder-pause --duration 7s --misbehave unfenced` (fencing disabled) |
//! | `holder-pause-rogue-grant` | `--scenario holder-pause --duration 7s --misbehave rogue-grant` (a double grant: worker 0 holds another name) |
//! | `redis-restart-empty-no-grace` | `--scenario redis-restart-empty --duration 10s --grace 0s` (the grace period disabled; kept from a run that overlapped) |
//!
//! Two more variants are injected into the real code's history: a double grant (a second
//! process given a copy of a real grant) and a stale accept (a refused stale write turned into
//! an accepted one). One live run records the fencing-disabled variant afresh.

use std::path::Path;
use std::time::Duration;

use distlock_torture::checker::History;
use distlock_torture::history::{Event, Record};
use distlock_torture::resource::{Accepted, Snapshot};
use distlock_torture::worker::Misbehave;
use distlock_torture::{Report, Scenario, check, runner, scenario};

use crate::common;

/// A kept history and the resource's final state.
fn load(name: &str) -> (History, Snapshot) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/histories")
        .join(name);
    runner::load(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
}

/// The report and the verdict's violations.
fn judge(history: &History, snapshot: &Snapshot, scenario: &Scenario) -> (Report, Vec<String>) {
    let report = check(history, snapshot);
    let violations = scenario.expected.judge(&report);
    (report, violations)
}

#[test]
fn the_real_code_passes_its_recorded_histories() {
    for (name, scenario) in [
        ("holder-pause", scenario::holder_pause()),
        ("redis-restart-empty", scenario::redis_restart_empty()),
    ] {
        let (history, snapshot) = load(name);
        let (report, violations) = judge(&history, &snapshot, &scenario);
        assert!(violations.is_empty(), "{name}: {violations:?}");
        assert!(report.grants >= 10, "{name}: {} grants", report.grants);
        let register = report.register().expect("fenced writes");
        assert!(register.is_linearizable(), "{name}: {register:?}");
        assert!(register.ops >= 20, "{name}: {} operations", register.ops);
    }
}

#[test]
fn the_grace_period_disabled_is_caught() {
    let (history, snapshot) = load("redis-restart-empty-no-grace");
    let (report, violations) = judge(&history, &snapshot, &scenario::redis_restart_empty());
    assert!(
        !report.overlaps.is_empty(),
        "a second holder after a restart"
    );
    assert!(
        violations.iter().any(|v| v.starts_with("overlapping")),
        "{violations:?}"
    );
}

#[test]
fn fencing_disabled_is_caught() {
    let (history, snapshot) = load("holder-pause-unfenced");
    let (report, violations) = judge(&history, &snapshot, &scenario::holder_pause());
    assert!(report.register_failed(), "{:?}", report.register());
    assert!(report.stale_accepted >= 1);
    assert!(
        violations.iter().any(|v| v.contains("not linearizable")),
        "{violations:?}"
    );
}

#[test]
fn a_rogue_double_grant_is_caught() {
    let (history, snapshot) = load("holder-pause-rogue-grant");
    let (report, violations) = judge(&history, &snapshot, &scenario::holder_pause());
    assert!(!report.overlaps.is_empty());
    assert!(
        violations.iter().any(|v| v.starts_with("overlapping")),
        "{violations:?}"
    );
}

/// A second process is handed a copy of one of the real history's grants (the lock granted
/// one lease twice): its section is the original's, so the two overlap for its whole length.
#[test]
fn an_injected_double_grant_is_caught() {
    let (mut history, snapshot) = load("holder-pause");
    let granted = history.workers[1]
        .iter()
        .position(|r| matches!(r.event, Event::Granted { .. }))
        .expect("worker 1 was granted the lock");
    let copy: Vec<Record> = history.workers[1][granted..]
        .iter()
        .take_while(|r| !matches!(r.event, Event::Released { .. }))
        .map(|r| Record {
            worker: Some(9),
            ..r.clone()
        })
        .collect();
    history.workers.push(copy);
    let (report, violations) = judge(&history, &snapshot, &scenario::holder_pause());
    assert!(
        report
            .overlaps
            .iter()
            .any(|o| o.first.process == 9 || o.second.process == 9),
        "{:?}",
        report.overlaps
    );
    assert!(!violations.is_empty());
}

/// A write the fence refused as stale is turned into an accepted one: in the history alone
/// (the log lacks it), and in the log too, where it lands after its successor's entries.
#[test]
fn an_injected_stale_accept_is_caught() {
    let (mut history, mut snapshot) = load("holder-pause");
    let (worker, index, token, sent_ns) = history
        .workers
        .iter()
        .enumerate()
        .find_map(|(w, records)| {
            records.iter().enumerate().find_map(|(i, r)| match r.event {
                Event::Write {
                    token,
                    sent_ns,
                    accepted: false,
                } => Some((w, i, token, sent_ns)),
                _ => None,
            })
        })
        .expect("the real run refused a stale write");
    if let Event::Write { accepted, .. } = &mut history.workers[worker][index].event {
        *accepted = true;
    }
    let (report, violations) = judge(&history, &snapshot, &scenario::holder_pause());
    assert!(report.register_failed(), "accepted, yet not in the log");
    assert!(!violations.is_empty());

    // In the log as well, after every entry whose write was answered before it was sent.
    let before = history
        .workers
        .iter()
        .flatten()
        .filter(|r| matches!(r.event, Event::Write { accepted: true, .. }) && r.at_ns < sent_ns)
        .count();
    let worker = u32::try_from(worker).expect("worker number");
    snapshot.accepted.insert(
        before.min(snapshot.accepted.len()),
        Accepted {
            token,
            worker,
            lock: None,
        },
    );
    let (report, violations) = judge(&history, &snapshot, &scenario::holder_pause());
    assert!(report.register_failed(), "{:?}", report.register());
    assert!(report.stale_accepted >= 1);
    assert!(
        violations.iter().any(|v| v.contains("not linearizable")),
        "{violations:?}"
    );
}

/// One broken variant recorded afresh (about 8 s): every worker writes around the fence, so
/// the resumed holder's stale write is accepted, and the checker says so.
#[test]
fn a_fresh_run_with_fencing_disabled_is_caught() {
    let outcome = common::run_misbehaving(
        &scenario::holder_pause(),
        Misbehave::Unfenced,
        Duration::from_secs(7),
    );
    assert!(!outcome.passed(), "the broken variant passed");
    assert!(
        outcome.report.register_failed(),
        "{:?}",
        outcome.report.register()
    );
    assert!(outcome.report.stale_accepted >= 1);
}
