//! `/metrics`: what the store holds, in Prometheus's text format (0.0.4), per kind and name
//! prefix. The prefix is the part of a lock's name before its first `:` (`order` for
//! `order:42`; a name without `:` is its own prefix), so the series stay few however many
//! locks are held. Written by hand: a handful of gauges from one snapshot, with `# HELP` and
//! `# TYPE` lines and escaped label values.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use lock_core::backend::HeldKind;

use super::snapshot::{View, now_ms};

/// The content type of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Sums over the locks of one kind and prefix.
#[derive(Debug, Default)]
struct Group {
    held: u64,
    oldest_ms: u64,
    waiters: u64,
    permits_used: u64,
}

/// One series' value for a group (`None`: no sample).
type GroupValue = fn(&Group) -> Option<String>;

/// The groups of a snapshot's locks, by kind and name prefix.
type Groups<'a> = BTreeMap<(&'a str, &'a str), Group>;

/// The exposition of `view`.
pub(crate) fn render(view: &View) -> String {
    let now = now_ms();
    let (groups, terms) = tally(view, now);
    let mut out = String::with_capacity(256 + groups.len() * 400);
    store_series(&mut out, view, now);
    group_series(&mut out, &groups);
    leader_terms(&mut out, terms);
    out
}

/// The library's word for a lock's kind (its metrics' `kind` label): a read-write lock is
/// `read` while readers hold it and `write` while its writer does.
fn kind_label(info: &crate::inspect::LockInfo) -> &'static str {
    match info.hold {
        Some(kind @ (HeldKind::Read | HeldKind::Write)) => kind.as_str(),
        _ => info.kind,
    }
}

/// The snapshot's locks summed per kind and name prefix (at `now`, Unix ms), and each
/// election's current term, per election name.
fn tally(view: &View, now: u64) -> (Groups<'_>, BTreeMap<&str, u64>) {
    let mut groups: Groups<'_> = BTreeMap::new();
    let mut terms: BTreeMap<&str, u64> = BTreeMap::new();
    for held in view.snapshot.iter().flat_map(|s| s.locks.iter()) {
        let info = &held.info;
        let prefix = info.name.split(':').next().unwrap_or_default();
        let group = groups.entry((kind_label(info), prefix)).or_default();
        group.held += 1;
        group.oldest_ms = group.oldest_ms.max(now.saturating_sub(held.since_ms));
        group.waiters += info.waiters;
        group.permits_used += info
            .permits
            .as_ref()
            .and_then(|p| p.used)
            .unwrap_or_default();
        if let Some(leader) = &info.leader {
            terms.insert(&info.name, leader.term);
        }
    }
    (groups, terms)
}

/// The series about the store and its sweeps: whether it is up, the snapshot's age (at `now`,
/// Unix ms) and sweep time when there is one, the sweeps done.
fn store_series(out: &mut String, view: &View, now: u64) {
    gauge(
        out,
        "distlock_store_up",
        "Whether the last sweep of the store succeeded (1) or failed (0; the other series are then the last good sweep's).",
    );
    let _ = writeln!(out, "distlock_store_up {}", u8::from(view.up()));
    if let Some(snapshot) = view.snapshot.as_deref() {
        gauge(
            out,
            "distlock_store_snapshot_age_seconds",
            "How old the snapshot these series come from is.",
        );
        let _ = writeln!(
            out,
            "distlock_store_snapshot_age_seconds {}",
            seconds(now.saturating_sub(snapshot.taken_ms))
        );
        gauge(
            out,
            "distlock_store_sweep_duration_seconds",
            "How long the snapshot's sweep of the store took.",
        );
        let _ = writeln!(
            out,
            "distlock_store_sweep_duration_seconds {}",
            snapshot.sweep.as_secs_f64()
        );
    }
    let _ = writeln!(
        out,
        "# HELP distlock_store_sweeps_total Sweeps of the store since the server started (good or not).\n# TYPE distlock_store_sweeps_total counter\ndistlock_store_sweeps_total {}",
        view.sweeps
    );
}

/// The series per kind and name prefix: locks held, the oldest hold, waiters, and (semaphores
/// only) permits used.
fn group_series(out: &mut String, groups: &Groups<'_>) {
    let series: [(&str, &str, GroupValue); 4] = [
        (
            "distlock_store_locks_held",
            "Locks held, per kind and name prefix (the name before its first ':').",
            |g| Some(g.held.to_string()),
        ),
        (
            "distlock_store_oldest_held_seconds",
            "How long the oldest hold of each kind and name prefix has lasted (the holder's since, else when this server first saw it).",
            |g| Some(seconds(g.oldest_ms)),
        ),
        (
            "distlock_store_waiters",
            "Processes waiting for the locks of each kind and name prefix (subscribed to their releases).",
            |g| Some(g.waiters.to_string()),
        ),
        (
            "distlock_store_permits_held",
            "Semaphore permits held, per lock-name prefix.",
            |g| Some(g.permits_used.to_string()),
        ),
    ];
    for (name, help, value) in series {
        gauge(out, name, help);
        for ((kind, prefix), group) in groups {
            if name == "distlock_store_permits_held" && *kind != "semaphore" {
                continue;
            }
            if let Some(value) = value(group) {
                let _ = writeln!(
                    out,
                    "{name}{{kind=\"{}\",lock_prefix=\"{}\"}} {value}",
                    escape(kind),
                    escape(prefix)
                );
            }
        }
    }
}

/// The current term of each election's leader, per election name.
fn leader_terms(out: &mut String, terms: BTreeMap<&str, u64>) {
    gauge(
        out,
        "distlock_store_leader_term",
        "The term (the grant's fencing token) of each election's current leader, per election name.",
    );
    for (name, term) in terms {
        let _ = writeln!(
            out,
            "distlock_store_leader_term{{lock=\"{}\"}} {term}",
            escape(name)
        );
    }
}

/// `# HELP` and `# TYPE ... gauge`.
fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// Milliseconds as seconds.
fn seconds(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// A label value escaped as the text format requires: `\`, `"` and newlines.
pub(crate) fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape("order"), "order");
    }
}
