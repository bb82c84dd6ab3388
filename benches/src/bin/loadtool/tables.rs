//! The load tool's table helpers, shared by the report and the stores' own sections
//! (`mysql::report`, `objstore::report`): a table with the tool's style, the cycle table of S1,
//! S2, S4 and P1, and the per-command breakdown.

use comfy_table::{CellAlignment, Table, presets};

use crate::cycles::CycleRun;
use crate::info::Cost;

/// A table with `header`, its columns from the third on aligned right (figures).
pub(crate) fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::UTF8_FULL_CONDENSED);
    t.set_header(header.to_vec());
    for i in 2..header.len() {
        if let Some(column) = t.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The table of S1, S2, S4 and P1: a row a client, with `server_time` in the column `time`.
pub(crate) fn cycle_table(rows: &[&CycleRun], time: &str, server_time: fn(&Cost) -> f64) -> Table {
    let mut t = table(&[
        "scenario",
        "client",
        "cycles/s",
        "p50 µs",
        "p99 µs",
        "cmds/cycle",
        time,
        "client CPU µs/cycle",
        "server CPU µs/cycle",
        "commands per cycle",
    ]);
    for r in rows {
        t.add_row(vec![
            r.scenario.to_owned(),
            r.client.clone(),
            format!("{:.0}", r.per_second),
            format!("{:.0}", r.latency.p50_us),
            format!("{:.0}", r.latency.p99_us),
            format!("{:.2}", r.cost.commands_per_op),
            format!("{:.1}", server_time(&r.cost)),
            format!("{:.1}", r.cost.client_cpu_us_per_op),
            format!("{:.1}", r.cost.server_cpu_us_per_op),
            breakdown(&r.cost),
        ]);
    }
    t
}

/// `evalsha 2 · set 2 · ...`, the largest first.
pub(crate) fn breakdown(cost: &Cost) -> String {
    let mut parts: Vec<(&String, &f64)> = cost.commands.iter().collect();
    parts.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    parts
        .iter()
        .filter(|(_, n)| **n >= 0.005)
        .map(|(name, n)| format!("{name} {}", trim(**n)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `2.00` → `2`, `0.5` → `0.5`, `0.123` → `0.12`.
pub(crate) fn trim(n: f64) -> String {
    let s = format!("{n:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakdown_lists_the_largest_first() {
        let mut cost = Cost::default();
        cost.commands.insert("evalsha".into(), 2.0);
        cost.commands.insert("time".into(), 1.0);
        cost.commands.insert("set".into(), 2.0);
        cost.commands.insert("subscribe".into(), 0.001);
        assert_eq!(breakdown(&cost), "evalsha 2 · set 2 · time 1");
        assert_eq!(trim(0.5), "0.5");
    }
}
