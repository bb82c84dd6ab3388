//! One target of the issues the tool measures (3, 4, 7, 13, 14, 17) and how a run did: the
//! record that the run's judges write, and each part's own (the PostgreSQL part's targets).

use serde::Serialize;

/// One target of the load tool (a scenario's goal, as the README lists them) and how this run did.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Target {
    pub(crate) id: &'static str,
    /// The issues that state it.
    pub(crate) issues: &'static str,
    pub(crate) what: &'static str,
    pub(crate) goal: &'static str,
    pub(crate) measured: String,
    /// `None` when the parts it needs were not run.
    pub(crate) met: Option<bool>,
}

/// A target the run measured: `met` is whether `measured` reached `goal`.
pub(crate) fn target(
    id: &'static str,
    issues: &'static str,
    what: &'static str,
    goal: &'static str,
    measured: String,
    met: bool,
) -> Target {
    Target {
        id,
        issues,
        what,
        goal,
        measured,
        met: Some(met),
    }
}

/// A target whose parts were not run.
pub(crate) fn not_run(
    id: &'static str,
    issues: &'static str,
    what: &'static str,
    goal: &'static str,
) -> Target {
    Target {
        id,
        issues,
        what,
        goal,
        measured: "not run".to_owned(),
        met: None,
    }
}
