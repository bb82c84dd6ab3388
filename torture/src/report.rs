//! The checker's report as tables: one per scenario, and a summary of several.

use std::time::Duration;

use comfy_table::{Table, presets};

use crate::checker::{RegisterCheck, Report, Search};
use crate::runner::Outcome;
use crate::scenario::{Bound, Expected};

/// One scenario's report: each check with its expected bound, the measured figure and
/// whether it held.
pub fn scenario_table(outcome: &Outcome) -> Table {
    report_table(&outcome.report, &outcome.scenario.expected)
}

/// A report judged against a verdict, as a table.
pub fn report_table(r: &Report, e: &Expected) -> Table {
    let mut t = table(&["check", "expected", "measured", ""]);
    let judged = |t: &mut Table, check: &str, bound: Bound, n: usize, extra: String| {
        let measured = if extra.is_empty() {
            n.to_string()
        } else {
            format!("{n} {extra}")
        };
        t.add_row(vec![
            check.to_owned(),
            bound.to_string(),
            measured,
            mark(bound.admits(n)),
        ]);
    };
    let info = |t: &mut Table, check: &str, measured: String| {
        t.add_row(vec![
            check.to_owned(),
            String::new(),
            measured,
            String::new(),
        ]);
    };
    info(
        &mut t,
        "grants / acquires that failed",
        format!("{} / {}", r.grants, r.acquire_failures),
    );
    let longest = r
        .longest_overlap()
        .map(|d| format!("(longest {})", ms(d)))
        .unwrap_or_default();
    judged(
        &mut t,
        "overlapping valid leases (one exclusive)",
        e.overlaps,
        r.overlaps.len(),
        longest,
    );
    judged(
        &mut t,
        "semaphore grants beyond its permits",
        e.over_permits,
        r.over_permits,
        String::new(),
    );
    info(
        &mut t,
        "most shared holders at once (readers, permit holders)",
        r.most_shared.to_string(),
    );
    let (linearizable, detail) = register_row(r);
    t.add_row(vec![
        "fenced register linearizable (writes' answers and the final log)".to_owned(),
        "yes".to_owned(),
        detail,
        mark(linearizable),
    ]);
    judged(
        &mut t,
        "stale writes accepted (the fenced log)",
        e.stale_accepted,
        r.stale_accepted,
        format!("(of {} accepted)", r.accepted),
    );
    judged(
        &mut t,
        "stale writes rejected",
        e.stale_rejected,
        r.stale_rejected,
        String::new(),
    );
    info(
        &mut t,
        "writes rejected while the lease was valid",
        r.rejected_while_valid.to_string(),
    );
    judged(
        &mut t,
        "fencing tokens that did not grow",
        e.token_regressions,
        r.token_regressions,
        String::new(),
    );
    info(
        &mut t,
        "writes after the lease ended / lost counter updates",
        format!(
            "{} / {} (of {} increments)",
            r.late_writes,
            r.lost_updates(),
            r.increments
        ),
    );
    judged(
        &mut t,
        "renewals after a release",
        e.renewals_after_release,
        r.renewals_after_release,
        format!("(of {} renewals)", r.renewals),
    );
    let (recovery, ok) = match r.slowest_recovery() {
        None => ("no fault healed".to_owned(), true),
        Some(None) => ("no grant after a heal".to_owned(), false),
        Some(Some(d)) => (
            format!("slowest {} over {} heals", ms(d), r.recoveries.len()),
            d <= e.recovery_within,
        ),
    };
    t.add_row(vec![
        "heal → next grant (from when the lock was free)".to_owned(),
        format!("≤ {}", ms(e.recovery_within)),
        recovery,
        mark(ok),
    ]);
    t
}

/// One row per scenario: what it did, what was expected, what was measured.
pub fn summary_table(outcomes: &[Outcome]) -> Table {
    let mut t = table(&[
        "scenario",
        "fault",
        "expected",
        "overlaps",
        "over permits",
        "linearizable",
        "stale accepted",
        "stale rejected",
        "slowest recovery",
        "verdict",
    ]);
    for o in outcomes {
        let r = &o.report;
        let e = &o.scenario.expected;
        t.add_row(vec![
            o.scenario.name.to_owned(),
            o.scenario.fault.to_owned(),
            format!(
                "overlaps {}, over permits {}, stale accepted {}, stale rejected {}, recovery ≤ {}",
                e.overlaps,
                e.over_permits,
                e.stale_accepted,
                e.stale_rejected,
                ms(e.recovery_within)
            ),
            r.overlaps.len().to_string(),
            r.over_permits.to_string(),
            if r.register_failed() { "NO" } else { "yes" }.to_owned(),
            r.stale_accepted.to_string(),
            r.stale_rejected.to_string(),
            match r.slowest_recovery() {
                None => "-".to_owned(),
                Some(None) => "never".to_owned(),
                Some(Some(d)) => ms(d),
            },
            if o.passed() { "held" } else { "VIOLATED" }.to_owned(),
        ]);
    }
    t
}

/// The register checks' row: whether they held, and what they measured (summed over the lock
/// names, a multi-lock's several).
fn register_row(r: &Report) -> (bool, String) {
    let Some(register) = r.register() else {
        return (true, "no fenced writes".to_owned());
    };
    let sum = |f: fn(&RegisterCheck) -> usize| r.registers.iter().map(f).sum::<usize>();
    let names = match r.registers.len() {
        1 => String::new(),
        n => format!(" over {n} locks"),
    };
    let searched = format!(
        "{} operations{names} ({} unanswered left out)",
        sum(|c| c.ops),
        sum(|c| c.unknown_left_out)
    );
    let steps = |c: &RegisterCheck| match c.search {
        Search::Linearizable { steps } => steps,
        _ => 0,
    };
    match &register.search {
        Search::Linearizable { .. } => (true, format!("yes: {searched}, {} steps", sum(steps))),
        Search::Undecided { steps } => (false, format!("undecided after {steps} steps")),
        Search::NotLinearizable { .. } => (
            false,
            format!(
                "NO: nothing explains {}",
                register.blocked.as_deref().unwrap_or("?")
            ),
        ),
    }
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_header(header.to_vec());
    t
}

fn mark(ok: bool) -> String {
    if ok { "ok" } else { "VIOLATED" }.to_owned()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}
