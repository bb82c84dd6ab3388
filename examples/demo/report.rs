//! The final report: a table of the workers, a table of the totals with their checks, and the
//! verdict.

use comfy_table::{CellAlignment, ContentArrangement, Table, modifiers, presets};

use crate::cli::Backend;
use crate::protocol::Summary;
use crate::resource::Snapshot;
use crate::slot::Slot;
use crate::stats::{ms_or_dash, percentile};

/// What the parent reads from Redis once the workers are done.
#[derive(Debug, Clone)]
pub(crate) struct EndState {
    /// `demo:counter`.
    pub(crate) counter: u64,
    /// `demo:inside`: holders still inside (0 unless a worker died there).
    pub(crate) inside: i64,
    /// `demo:resource`.
    pub(crate) resource: Snapshot,
}

/// One row of the totals table.
struct Row {
    /// What is counted.
    figure: &'static str,
    /// The count, with any detail.
    value: String,
    /// What it must be, if anything.
    expected: &'static str,
    /// `Some(passed)` for a check, `None` for information.
    passed: Option<bool>,
}

impl Row {
    fn info(figure: &'static str, value: impl ToString) -> Self {
        Self {
            figure,
            value: value.to_string(),
            expected: "",
            passed: None,
        }
    }

    fn check(figure: &'static str, value: String, expected: &'static str, passed: bool) -> Self {
        Self {
            figure,
            value,
            expected,
            passed: Some(passed),
        }
    }

    /// A must-be-zero check.
    fn zero(figure: &'static str, value: u64) -> Self {
        Self::check(figure, value.to_string(), "must be 0", value == 0)
    }
}

/// One worker's share of a run: the figures the spread shows.
#[derive(Debug, Clone)]
pub(crate) struct Share {
    /// The worker's number.
    pub(crate) index: u32,
    /// Locks it was granted.
    pub(crate) grants: u64,
    /// Its median wait for the lock, in microseconds.
    pub(crate) wait_p50_us: Option<u64>,
    /// Its 99th-percentile wait, in microseconds.
    pub(crate) wait_p99_us: Option<u64>,
}

/// How the grants and waits of a run spread over its workers.
#[derive(Debug, Clone)]
pub(crate) struct Spread {
    /// One share per worker.
    pub(crate) workers: Vec<Share>,
    /// The wait percentiles over every worker's waits.
    pub(crate) all_p50_us: Option<u64>,
    /// See `all_p50_us`.
    pub(crate) all_p99_us: Option<u64>,
}

impl Spread {
    /// The spread of the workers in `slots`.
    pub(crate) fn of(slots: &[Slot]) -> Self {
        let all: Vec<u64> = slots
            .iter()
            .flat_map(|s| s.waits_us.iter().copied())
            .collect();
        Self {
            workers: slots
                .iter()
                .map(|slot| Share {
                    index: slot.index,
                    grants: slot.figures().acquisitions,
                    wait_p50_us: percentile(&slot.waits_us, 50),
                    wait_p99_us: percentile(&slot.waits_us, 99),
                })
                .collect(),
            all_p50_us: percentile(&all, 50),
            all_p99_us: percentile(&all, 99),
        }
    }

    /// The fewest and the most grants of one worker.
    fn min_max(&self) -> Option<(u64, u64)> {
        let grants = self.workers.iter().map(|w| w.grants);
        Some((grants.clone().min()?, grants.max()?))
    }

    /// The most grants of one worker over the fewest, with two decimals: `"1.04"`; `"∞"` when
    /// a worker got none.
    pub(crate) fn ratio(&self) -> String {
        match self.min_max() {
            None => "-".to_owned(),
            Some((0, _)) => "∞".to_owned(),
            Some((min, max)) => {
                let hundredths = (max * 200 + min) / (2 * min); // max / min × 100, rounded
                format!("{}.{:02}", hundredths / 100, hundredths % 100)
            }
        }
    }
}

/// Prints the report for `slots`, with the checks that need Redis's final state when `end` is
/// known (`None`: interrupted, or the state could not be read); `fair` says which lock the
/// workers took, `backend` where it lived. Returns whether every check passed; a missing `end`
/// fails.
pub(crate) fn print(slots: &[Slot], end: Option<&EndState>, fair: bool, backend: Backend) -> bool {
    println!("{}", workers_table(slots));
    let rows = totals(slots, end, backend);
    println!("{}", totals_table(&rows));
    print_legend(fair, backend);

    for slot in slots {
        for problem in slot.problems() {
            println!("worker {} (pid {}): {problem}", slot.index, slot.pid);
        }
    }
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.passed == Some(false))
        .map(|r| r.figure)
        .collect();
    if end.is_none() {
        println!("NOT CHECKED: the final state of Redis is unknown");
        false
    } else if failed.is_empty() {
        println!(
            "PASS: one holder at a time, no update lost, every stale write rejected by the \
             fenced resource"
        );
        true
    } else {
        println!("FAIL: {}", failed.join("; "));
        false
    }
}

/// One row per worker, then one for all of them.
fn workers_table(slots: &[Slot]) -> Table {
    let mut table = table([
        "worker",
        "grants",
        "wait\np50 ms",
        "wait\np99 ms",
        "stalls",
        "stale\nrejected",
        "timeouts",
        "status",
    ]);
    let mut all = Summary::default();
    let mut all_waits = Vec::new();
    for slot in slots {
        let figures = slot.figures();
        all.add(&figures);
        all_waits.extend_from_slice(&slot.waits_us);
        table.add_row([
            slot.index.to_string(),
            figures.acquisitions.to_string(),
            ms_or_dash(percentile(&slot.waits_us, 50)),
            ms_or_dash(percentile(&slot.waits_us, 99)),
            figures.stalls.to_string(),
            figures.stale_rejected.to_string(),
            figures.wait_timeouts.to_string(),
            slot.failure()
                .map_or_else(|| "ok".to_owned(), |why| format!("FAILED: {why}")),
        ]);
    }
    table.add_row([
        "all".to_owned(),
        all.acquisitions.to_string(),
        ms_or_dash(percentile(&all_waits, 50)),
        ms_or_dash(percentile(&all_waits, 99)),
        all.stalls.to_string(),
        all.stale_rejected.to_string(),
        all.wait_timeouts.to_string(),
        String::new(),
    ]);
    for column in 1..=6 {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// The totals and their checks.
fn totals(slots: &[Slot], end: Option<&EndState>, backend: Backend) -> Vec<Row> {
    let mut sum = Summary::default();
    for slot in slots {
        sum.add(&slot.figures());
    }
    let failed_workers = slots.iter().filter(|s| s.failure().is_some()).count();
    let complete = slots.iter().all(|s| s.summary.is_some());
    let unknown = |why: &str| format!("unknown ({why})");

    let mut rows = vec![
        Row::info(
            "lock backend",
            match backend {
                Backend::Redis => "redis (RedisLock)",
                Backend::Postgres => "postgres (PostgresLock); counter and resource on Redis",
                Backend::Etcd => "etcd (EtcdLock); counter and resource on Redis",
                Backend::S3 => "s3 (ObjectStoreLock on SeaweedFS); counter and resource on Redis",
                Backend::Mysql => "mysql (MysqlLock); counter and resource on Redis",
            },
        ),
        Row::info("total acquisitions", sum.acquisitions),
    ];
    let spread = Spread::of(slots);
    if let Some((min, max)) = spread.min_max() {
        rows.push(Row::info(
            "grants per worker: fewest, most (most / fewest)",
            format!("{min}, {max} ({})", spread.ratio()),
        ));
    }

    // Every write the resource accepted was counted by exactly one worker.
    let accepted = sum.fenced_accepted + sum.stale_accepted;
    rows.push(match end {
        Some(end) if complete => Row::check(
            "fenced writes accepted",
            format!("{accepted} (the resource counted {})", end.resource.writes),
            "= the resource's count",
            accepted == end.resource.writes,
        ),
        Some(end) => Row::info(
            "fenced writes accepted",
            format!(
                "{} (the resource counted; a worker sent no summary)",
                end.resource.writes
            ),
        ),
        None if complete => Row::info("fenced writes accepted", accepted),
        None => Row::info(
            "fenced writes accepted",
            unknown("a worker sent no summary"),
        ),
    });
    rows.push(Row::info(
        "stale writes rejected",
        format!(
            "{} (of {} stalls simulated)",
            sum.stale_rejected, sum.stalls
        ),
    ));
    rows.push(Row::zero("stale writes ACCEPTED", sum.stale_accepted));
    rows.push(Row::zero("exclusion violations", sum.violations));
    rows.push(match end {
        Some(end) if complete => {
            let lost = i128::from(sum.increments) - i128::from(end.counter);
            Row::check(
                "lost updates (expected − actual)",
                format!("{lost} ({} − {})", sum.increments, end.counter),
                "must be 0",
                lost == 0,
            )
        }
        Some(_) => Row::check(
            "lost updates (expected − actual)",
            unknown("a worker sent no summary"),
            "must be 0",
            false,
        ),
        None => Row::info(
            "lost updates (expected − actual)",
            unknown("no final state"),
        ),
    });
    rows.push(Row::check(
        "workers failed",
        failed_workers.to_string(),
        "must be 0",
        failed_workers == 0,
    ));
    rows.push(Row::zero(
        "stalled holders that still owned the lock at release",
        sum.stale_still_ours,
    ));
    if let Some(end) = end {
        rows.push(Row::check(
            "holders left inside the critical section",
            end.inside.to_string(),
            "must be 0",
            end.inside == 0,
        ));
    }

    // Information: non-zero only on an overloaded machine or a short run.
    if sum.stale_unchecked > 0 {
        rows.push(Row::info(
            "stalls with no newer write to lose to (not checked)",
            sum.stale_unchecked,
        ));
    }
    if sum.fenced_rejected > 0 || sum.overruns > 0 {
        rows.push(Row::info(
            "current writes rejected / leases that ran out mid-work",
            format!("{} / {}", sum.fenced_rejected, sum.overruns),
        ));
    }
    rows.push(Row::info("wait timeouts", sum.wait_timeouts));
    if let Some(Snapshot {
        fence: Some(fence),
        writer,
        ..
    }) = end.map(|e| &e.resource)
    {
        rows.push(Row::info(
            "last accepted write",
            format!(
                "fencing token {fence} by {}",
                writer.as_deref().unwrap_or("?")
            ),
        ));
    }
    rows
}

/// The spreads of runs with each lock (`true`: fair) side by side: per worker its grants and
/// wait percentiles under each lock, then every worker's waits, then most / fewest grants.
pub(crate) fn spreads_table(runs: &[(bool, Spread)]) -> Table {
    let name = |fair: bool| if fair { "fair" } else { "lock" };
    let mut header = vec!["worker".to_owned()];
    for figure in ["grants", "wait p50 ms", "wait p99 ms"] {
        for (fair, _) in runs {
            header.push(format!("{figure}\n{}", name(*fair)));
        }
    }
    let mut table = table(header);
    let workers = runs.iter().map(|(_, s)| s.workers.len()).max().unwrap_or(0);
    for w in 0..workers {
        let share = |spread: &Spread| spread.workers.get(w).cloned();
        let index = runs
            .iter()
            .find_map(|(_, s)| share(s))
            .map_or_else(String::new, |s| s.index.to_string());
        let mut row = vec![index];
        row.extend(
            runs.iter()
                .map(|(_, s)| share(s).map_or_else(|| "-".to_owned(), |s| s.grants.to_string())),
        );
        row.extend(
            runs.iter()
                .map(|(_, s)| ms_or_dash(share(s).and_then(|s| s.wait_p50_us))),
        );
        row.extend(
            runs.iter()
                .map(|(_, s)| ms_or_dash(share(s).and_then(|s| s.wait_p99_us))),
        );
        table.add_row(row);
    }
    let mut all = vec!["all".to_owned()];
    all.extend(
        runs.iter()
            .map(|(_, s)| s.workers.iter().map(|w| w.grants).sum::<u64>().to_string()),
    );
    all.extend(runs.iter().map(|(_, s)| ms_or_dash(s.all_p50_us)));
    all.extend(runs.iter().map(|(_, s)| ms_or_dash(s.all_p99_us)));
    table.add_row(all);
    let mut ratio = vec!["most / fewest".to_owned()];
    ratio.extend(runs.iter().map(|(_, s)| s.ratio()));
    ratio.extend(std::iter::repeat_n(String::new(), 2 * runs.len()));
    table.add_row(ratio);
    for column in 1..=3 * runs.len() {
        if let Some(column) = table.column_mut(column) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// The totals rows as a table.
fn totals_table(rows: &[Row]) -> Table {
    let mut table = table(["total", "value", "expected", "check"]);
    for row in rows {
        let check = match row.passed {
            Some(true) => "ok",
            Some(false) => "FAIL",
            None => "",
        };
        table.add_row([row.figure, row.value.as_str(), row.expected, check]);
    }
    if let Some(column) = table.column_mut(1) {
        column.set_cell_alignment(CellAlignment::Right);
    }
    table
}

/// What the wait percentiles mean with the fair lock (`--fair`), in place of the first entry of
/// [`LEGEND`].
const FAIR_WAITS: (&str, &str) = (
    "wait p50 / p99 (fair lock)",
    "The lock goes to the head of a queue in Redis, in the order the workers asked, and a \
     release tells the head alone: the workers take turns, so their grants come out nearly \
     equal. The price is the wait: a worker that has just released queues behind the others \
     instead of taking the lock again at once, so a typical acquisition waits for every other \
     worker's turn, and every handover costs a round trip through Redis pub/sub. Behind a \
     stalled holder the head waits for the lease to run out, as with the plain lock.",
);

/// What the wait percentiles mean with the lock on PostgreSQL (`--backend postgres`), in place
/// of the first entry of [`LEGEND`].
const POSTGRES_WAITS: (&str, &str) = (
    "wait p50 / p99 (PostgresLock)",
    "Each acquisition is one statement on the lease table, and a release is announced with \
     pg_notify to the waiters, which listen on one connection per worker (LISTEN/NOTIFY \
     instead of Redis pub/sub). As with Redis, the worker that has just released asks again \
     at once and often wins, so most waits are short; behind a stalled holder, whose lease \
     runs out unannounced, the others wait until it expires by the server's clock. Between \
     processes the first to ask wins, which is why the workers' acquisitions differ (the fair \
     lock, --fair, needs Redis).",
);

/// What the wait percentiles mean with the lock on etcd (`--backend etcd`), in place of the
/// first entry of [`LEGEND`].
const ETCD_WAITS: (&str, &str) = (
    "wait p50 / p99 (EtcdLock)",
    "Each acquisition is a lease grant and one transaction, committed by etcd's Raft log \
     (fsynced) before it is answered, and a release is announced to the waiters by a watch on \
     the key's deletion. As with Redis, the worker that has just released asks again at once \
     and often wins; behind a stalled holder the others wait until its lease runs out on \
     the cluster (etcd counts leases in whole seconds and checks them every 500 ms). Between \
     processes the first to ask wins (the fair lock, --fair, needs Redis).",
);

/// What the wait percentiles mean with the lock on S3 (`--backend s3`), in place of the
/// first entry of [`LEGEND`].
const S3_WAITS: (&str, &str) = (
    "wait p50 / p99 (ObjectStoreLock)",
    "Each acquisition is a read and a conditional write of the lock object. Releases are not \
     announced: waiters poll with a jittered backoff, so most waits are a few polls. Behind a \
     stalled holder the others wait until they have seen its object unchanged for a whole \
     lease on their own clocks (no clock is trusted), so those waits are at least one lease. \
     Between processes the first to ask wins (the fair lock, --fair, needs Redis).",
);

/// What the wait percentiles mean with the lock on MariaDB / MySQL (`--backend mysql`), in
/// place of the first entry of [`LEGEND`].
const MYSQL_WAITS: (&str, &str) = (
    "wait p50 / p99 (MysqlLock)",
    "Each acquisition is one INSERT ... ON DUPLICATE KEY UPDATE on the lease table (a busy \
     answer also reads the row for the holder's time left). MySQL cannot announce a release, \
     so the waiters poll with the locker's backoff, bounded by the holder's time left: the worker that has just released asks again \
     at once and usually wins, and the others' waits are longer than with Redis or \
     PostgreSQL. Behind a stalled holder the others wait until its lease expires by the \
     server's clock.",
);

/// What the less obvious figures mean, wrapped to the terminal.
const LEGEND: &[(&str, &str)] = &[
    (
        "wait p50 / p99",
        "Most acquisitions wait well under a millisecond: the worker that has just released asks \
         again at once and often wins, while the others learn of the release through Redis \
         pub/sub a moment later. A few wait a second or more: behind a stalled holder, whose \
         lease runs out unannounced, and after losing several such races in a row. First-in \
         first-out order holds among the tasks of one process only; between processes the \
         first to ask wins, which is why the workers' acquisitions differ (--fair takes turns \
         instead; --compare runs both).",
    ),
    (
        "stalls",
        "Every Nth acquisition (--pause-every) a worker sleeps past its lease, like a GC pause, \
         then writes with its old fencing token after another worker has written: the fenced \
         resource must reject that write (stale rejected; stale writes ACCEPTED must stay 0).",
    ),
    (
        "stalled holders that still owned the lock at release",
        "After such a stall the lease has run out, so the stalled worker's release must find \
         the lock no longer its own. A non-zero count would mean a lease outlived its TTL.",
    ),
    (
        "holders left inside the critical section",
        "A Redis counter each holder raises on entering its critical section and lowers on \
         leaving it (raising it to 2 would be an exclusion violation): after the run it must \
         be back at 0.",
    ),
];

/// Prints [`LEGEND`] wrapped to the table width, with [`FAIR_WAITS`] first when `fair`, or
/// [`POSTGRES_WAITS`] on PostgreSQL, or [`ETCD_WAITS`] on etcd.
fn print_legend(fair: bool, backend: Backend) {
    let width = usize::from(width()).max(40);
    println!("What the figures mean:");
    let waits = match (fair, backend) {
        (true, _) => FAIR_WAITS,
        (false, Backend::Postgres) => POSTGRES_WAITS,
        (false, Backend::Etcd) => ETCD_WAITS,
        (false, Backend::S3) => S3_WAITS,
        (false, Backend::Mysql) => MYSQL_WAITS,
        (false, Backend::Redis) => LEGEND[0],
    };
    for (term, meaning) in std::iter::once(&waits).chain(&LEGEND[1..]) {
        println!("  {term}:");
        for line in wrap(meaning, width - 4) {
            println!("    {line}");
        }
    }
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word gets a line
/// of its own).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The width to fit the report to: the terminal's, else `COLUMNS`, else 100 columns.
fn width() -> u16 {
    console::Term::stdout()
        .size_checked()
        .map(|(_rows, columns)| columns)
        .or_else(|| std::env::var("COLUMNS").ok()?.parse().ok())
        .unwrap_or(100)
}

/// An empty table with the demo's look and `header`, fitted to [`width`]: cells wrap when the
/// terminal is narrower than the table.
fn table(header: impl Into<comfy_table::Row>) -> Table {
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_FULL_CONDENSED)
        .apply_modifier(modifiers::UTF8_ROUND_CORNERS)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width())
        .set_header(header);
    table
}

#[cfg(test)]
mod tests {
    use super::{Share, Spread, wrap};

    fn spread(grants: &[u64]) -> Spread {
        Spread {
            workers: grants
                .iter()
                .zip(0..)
                .map(|(&grants, index)| Share {
                    index,
                    grants,
                    wait_p50_us: None,
                    wait_p99_us: None,
                })
                .collect(),
            all_p50_us: None,
            all_p99_us: None,
        }
    }

    #[test]
    fn most_over_fewest() {
        assert_eq!(spread(&[100, 150, 120]).ratio(), "1.50");
        assert_eq!(spread(&[3, 2]).ratio(), "1.50");
        assert_eq!(spread(&[3, 3]).ratio(), "1.00");
        assert_eq!(spread(&[300, 7]).ratio(), "42.86");
        assert_eq!(spread(&[5, 0]).ratio(), "∞");
        assert_eq!(spread(&[]).ratio(), "-");
    }

    #[test]
    fn wraps_at_spaces_within_the_width() {
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(wrap("a verylongword b", 4), ["a", "verylongword", "b"]);
        assert!(wrap("", 10).is_empty());
    }
}
