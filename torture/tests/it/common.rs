//! The one place of shared setup: runs a scenario's short form from a test, one at a time.

use std::sync::{Mutex, PoisonError};

use distlock_torture::worker::Misbehave;
use distlock_torture::{Options, Outcome, Scenario, Server, report, run};

/// Scenarios share two cores with the rest of the test suite: one at a time in this test binary
/// (every backend's), so that their timing verdicts measure distlock rather than the machine's
/// contention.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs the short form of `scenario` with the worker processes started from the `torture`
/// binary, and prints its report.
pub(crate) fn run_short(scenario: &Scenario) -> Outcome {
    run_short_on(scenario, Server::Redis)
}

/// [`run_short`] with the lock's Redis stores on `server`.
pub(crate) fn run_short_on(scenario: &Scenario, server: Server) -> Outcome {
    run_on(scenario, server, None)
}

/// [`run_short`], but for `duration` instead of the short form's length: for a verdict that
/// needs many fault cycles.
pub(crate) fn run_for(scenario: &Scenario, duration: std::time::Duration) -> Outcome {
    run_on(scenario, Server::Redis, Some(duration))
}

/// [`run_for`] with the workers playing the broken variant `misbehave`.
pub(crate) fn run_misbehaving(
    scenario: &Scenario,
    misbehave: Misbehave,
    duration: std::time::Duration,
) -> Outcome {
    run_with(scenario, Server::Redis, Some(duration), misbehave)
}

fn run_on(scenario: &Scenario, server: Server, duration: Option<std::time::Duration>) -> Outcome {
    run_with(scenario, server, duration, Misbehave::None)
}

fn run_with(
    scenario: &Scenario,
    server: Server,
    duration: Option<std::time::Duration>,
    misbehave: Misbehave,
) -> Outcome {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let options = Options {
        server,
        duration,
        misbehave,
        ..Options::short(env!("CARGO_BIN_EXE_torture"))
    };
    let outcome = run(scenario, &options).expect("the run takes place");
    eprintln!(
        "== {} ({} cycles, {:.1} s)\n{}",
        scenario.name,
        outcome.cycles,
        outcome.wall.as_secs_f64(),
        report::scenario_table(&outcome)
    );
    outcome
}

/// Asserts that the scenario's written verdict held.
pub(crate) fn assert_verdict(outcome: &Outcome) {
    assert!(
        outcome.passed(),
        "{}: the verdict was violated:\n  {}",
        outcome.scenario.name,
        outcome.violations.join("\n  ")
    );
}
