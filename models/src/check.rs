//! Running a model through stateright's breadth-first checker and reading what it found: the
//! state counts, the time, and every discovery with its path (a counterexample for an `always`
//! property, an example for a `sometimes` one), printed so that a failing test shows the trace.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, Model};

/// What one run of the checker over a model found.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The model's name, as the tests print it.
    pub model: String,
    /// States generated (with repetitions: every edge the checker followed).
    pub states: usize,
    /// Distinct states visited.
    pub unique: usize,
    /// The longest path explored, in actions.
    pub depth: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Property name → the path that discovered it (actions, then the last state), for every
    /// property with a discovery.
    pub discoveries: BTreeMap<&'static str, String>,
}

impl Outcome {
    /// The path found for `property`, if any.
    pub fn discovery(&self, property: &str) -> Option<&str> {
        self.discoveries.get(property).map(String::as_str)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} states ({} unique), depth {}, {:.2} s",
            self.model,
            self.states,
            self.unique,
            self.depth,
            self.elapsed.as_secs_f64()
        )?;
        for (name, path) in &self.discoveries {
            write!(f, "\n  discovered {name:?}:\n{path}")?;
        }
        Ok(())
    }
}

/// Checks `model` exhaustively, breadth first on one thread (the test command runs many tests
/// at once on few cores), bounded by `max_depth` actions when given. Returns when every state
/// within the bounds is visited or every property has a discovery.
pub fn run<M>(name: &str, model: M, max_depth: Option<usize>) -> Outcome
where
    M: Model + Send + Sync + 'static,
    M::State: Hash + Send + Sync + Clone + PartialEq + Debug + 'static,
    M::Action: Clone + PartialEq + Debug,
{
    let started = Instant::now();
    let mut builder = model.checker();
    if let Some(depth) = max_depth {
        builder = builder.target_max_depth(depth);
    }
    let checker = builder.spawn_bfs().join();
    let elapsed = started.elapsed();
    let discoveries = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| {
            let last = format!("{:#?}", path.last_state());
            (name, format!("{path}  last state: {last}"))
        })
        .collect();
    let outcome = Outcome {
        model: name.to_owned(),
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed,
        discoveries,
    };
    // The figures the README quotes: `cargo nextest run -p distlock-models --no-capture`.
    println!("{outcome}");
    outcome
}

/// Whether no action but the ones `giving_up` names can change `state`: every other action is
/// disabled (or leaves the state as it is). The models bound every run (finite rounds, a clock
/// that advances only towards a pending deadline), so every maximal run ends in such a state;
/// liveness is checked there as a safety invariant ("quiescent ⇒ everyone served"), which
/// stateright checks on every reachable state without the false negatives its `eventually` has
/// on paths that join (see the README). Giving up (a waiter's cancellation or deadline) is left
/// out: a waiter that could only give up is a waiter left waiting.
pub fn quiescent<M>(model: &M, state: &M::State, giving_up: fn(&M::Action) -> bool) -> bool
where
    M: Model,
    M::State: PartialEq,
{
    model
        .next_steps(state)
        .into_iter()
        .all(|(action, next)| giving_up(&action) || next == *state)
}

/// Asserts that `outcome` has no discovery for any of `properties` (safety and liveness
/// invariants: no counterexample) and has one for each of `examples` (`sometimes` properties: the
/// interesting paths are reachable, so the invariants are not vacuous).
///
/// # Panics
/// When one does not hold, with every discovery's path in the message.
pub fn assert_holds(outcome: &Outcome, properties: &[&str], examples: &[&str]) {
    for property in properties {
        assert!(
            outcome.discovery(property).is_none(),
            "{property:?} has a counterexample\n{outcome}"
        );
    }
    for example in examples {
        assert!(
            outcome.discovery(example).is_some(),
            "{example:?} is never reached: the model is vacuous there\n{outcome}"
        );
    }
}

/// Asserts that `outcome` has a counterexample for `property` (a known-bad variant is
/// rejected), and returns its path.
///
/// # Panics
/// When the checker found none.
pub fn assert_rejected<'a>(outcome: &'a Outcome, property: &str) -> &'a str {
    match outcome.discovery(property) {
        Some(path) => path,
        None => panic!(
            "the checker accepted a known-bad variant: no counterexample for {property:?}\n{outcome}"
        ),
    }
}
