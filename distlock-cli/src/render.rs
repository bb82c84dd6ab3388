//! Human output: tables (comfy-table) sized to the terminal, and the units in them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{ContentArrangement, Table, presets};

use lock_core::backend::Holder;

use crate::inspect::{LeaderInfo, LockInfo, Members, WaiterInfo, description};

/// A table without borders (like `docker ps`: easy to read, `grep` and `awk`), as wide as the
/// terminal when there is one.
pub(crate) fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_preset(presets::NOTHING);
    let term = console::Term::stdout();
    if term.is_term() {
        let (_, width) = term.size();
        table
            .set_width(width)
            .set_content_arrangement(ContentArrangement::Dynamic);
    }
    table.set_header(header.to_vec());
    table
}

/// An extra column: its title, and its cell for a lock.
pub(crate) type Column<'a> = (&'a str, &'a dyn Fn(&LockInfo) -> String);

/// A table as text, without the padding at the ends of its lines.
pub(crate) fn text(table: &Table) -> String {
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `ls` (and `watch`) table; `extra` adds a last column per lock.
pub(crate) fn lock_table(locks: &[LockInfo], extra: Option<Column<'_>>) -> Table {
    let mut header = vec![
        "NAME",
        "KIND",
        "HOLDER",
        "TTL",
        "FENCING TOKEN",
        "WAITERS",
        "HELD BY",
    ];
    if let Some((title, _)) = extra {
        header.push(title);
    }
    let mut table = table(&header);
    for lock in locks {
        let mut row = vec![
            lock.name.clone(),
            lock.kind.to_owned(),
            holder_cell(lock),
            lock.ttl_ms.map_or_else(|| "-".into(), ms),
            lock.fencing_token
                .map_or_else(|| "-".into(), |t| t.to_string()),
            waiters(lock),
            held_by_cell(lock),
        ];
        if let Some((_, cell)) = extra {
            row.push(cell(lock));
        }
        table.add_row(row);
    }
    table
}

/// The holder column: the token, or the readers, or the permits in use.
fn holder_cell(lock: &LockInfo) -> String {
    if let Some(coordination) = &lock.coordination {
        return coordination.summary();
    }
    if let Some(permits) = &lock.permits {
        let used = permits.used.map_or_else(|| "?".into(), |n| n.to_string());
        let max = permits.max.map_or_else(|| "?".into(), |n| n.to_string());
        return format!("{used}/{max} permits, {} holders", permits.holders.count);
    }
    match (&lock.token, &lock.readers) {
        (Some(token), _) => token.clone(),
        (None, Some(readers)) => format!("{} readers", readers.count),
        (None, None) => "-".into(),
    }
}

/// Subscribed waiters, and queued ones where the kind queues.
fn waiters(lock: &LockInfo) -> String {
    if lock.queued > 0 {
        format!("{} (+{} queued)", lock.waiters, lock.queued)
    } else {
        lock.waiters.to_string()
    }
}

/// A text field of a holder's [`description`].
fn field(fields: &serde_json::Map<String, serde_json::Value>, name: &str) -> Option<String> {
    fields.get(name)?.as_str().map(str::to_owned)
}

/// A number field of a holder's [`description`].
fn number(fields: &serde_json::Map<String, serde_json::Value>, name: &str) -> Option<u64> {
    fields.get(name)?.as_u64()
}

/// The HELD BY column: the election's leader (its value, and for how long it leads), or the
/// holder's description.
fn held_by_cell(lock: &LockInfo) -> String {
    if let Some(leader) = &lock.leader {
        return match leader.since_ms {
            Some(since) => format!("leader {}, for {}", leader.value, age(since)),
            None => format!("leader {}", leader.value),
        };
    }
    lock.holder.as_ref().map_or_else(|| "-".into(), held_by)
}

/// The longest note shown in a table cell (`show` prints it whole).
const NOTE_SHOWN: usize = 60;

/// `host, pid, label, note, for <age>`: the parts the holder gave.
fn held_by(holder: &Holder) -> String {
    let fields = description(holder);
    let mut parts = Vec::new();
    if let Some(host) = field(&fields, "host") {
        parts.push(host);
    }
    if let Some(pid) = number(&fields, "pid") {
        parts.push(format!("pid {pid}"));
    }
    if let Some(label) = field(&fields, "label") {
        parts.push(label);
    }
    if let Some(note) = field(&fields, "note") {
        parts.push(shortened(&note));
    }
    if let Some(since) = number(&fields, "since_ms") {
        parts.push(format!("for {}", age(since)));
    }
    // A PostgreSQL advisory lock's session (lock-postgres's description of it).
    if let Some(pid) = number(&fields, "backend_pid") {
        parts.push(format!("backend pid {pid}"));
    }
    if let Some(app) = field(&fields, "application_name").filter(|a| !a.is_empty()) {
        parts.push(app);
    }
    if let Some(since) = number(&fields, "session_since_ms") {
        parts.push(format!("session for {}", age(since)));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// `text` on one line of at most [`NOTE_SHOWN`] characters (`…` where it was cut).
fn shortened(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > NOTE_SHOWN || line.len() < text.trim_end().len() {
        let cut: String = line.chars().take(NOTE_SHOWN - 1).collect();
        format!("{cut}…")
    } else {
        line.to_owned()
    }
}

/// The `show` table: one field per line.
pub(crate) fn show_table(lock: &LockInfo) -> Table {
    let mut t = table(&["FIELD", "VALUE"]);
    lock_rows(&mut t, lock);
    if let Some(leader) = &lock.leader {
        leader_rows(&mut t, leader);
    } else if let Some(holder) = &lock.holder {
        holder_rows(&mut t, holder);
    }
    share_rows(&mut t, lock);
    quorum_rows(&mut t, lock);
    fair_rows(&mut t, lock);
    t
}

/// What every lock has: its name, key, kind, node, and the token, TTL, fencing token and
/// waiters of its hold.
fn lock_rows(t: &mut Table, lock: &LockInfo) {
    t.add_row(vec!["name".into(), lock.name.clone()]);
    t.add_row(vec!["key".into(), lock.key.clone()]);
    t.add_row(vec!["kind".into(), lock.kind.to_owned()]);
    t.add_row(vec!["node".into(), lock.node.clone()]);
    if let Some(token) = &lock.token {
        t.add_row(vec!["token".into(), token.clone()]);
    }
    if let Some(ttl) = lock.ttl_ms {
        t.add_row(vec!["ttl".into(), ms(ttl)]);
    }
    if let Some(delay) = lock.lock_delay_ms {
        let value = match lock.delayed_until_ms {
            // The holder's lease is over (it crashed, hung or was cut off): nobody gets the
            // name before the delay's end.
            Some(until) => format!(
                "{} — delayed until {} (the holder's lease is over)",
                ms(i64::try_from(delay).unwrap_or(i64::MAX)),
                timestamp(until)
            ),
            None => format!(
                "{} (kept after the lease if the holder fails)",
                ms(i64::try_from(delay).unwrap_or(i64::MAX))
            ),
        };
        t.add_row(vec!["lock-delay".into(), value]);
    }
    if let Some(coordination) = &lock.coordination {
        t.add_row(vec![lock.kind.into(), coordination.summary()]);
    }
    if let Some(revocation) = &lock.revocation {
        let why = revocation
            .note
            .as_deref()
            .map(|note| format!(" ({})", shortened(note)))
            .unwrap_or_default();
        t.add_row(vec![
            "revocation".into(),
            format!(
                "asked to give it up{why} — grant {}",
                revocation.fencing_token
            ),
        ]);
    }
    t.add_row(vec![
        "fencing token".into(),
        lock.fencing_token.map_or_else(
            || "- (no counter kept)".into(),
            |f| format!("{f} (last issued)"),
        ),
    ]);
    t.add_row(vec!["waiters".into(), lock.waiters.to_string()]);
    for waiter in &lock.waiting {
        t.add_row(vec!["waiting".into(), waiter_line(waiter)]);
    }
}

/// One waiter that describes itself: who, and since when.
fn waiter_line(waiter: &WaiterInfo) -> String {
    let who: Vec<String> = [
        waiter.host.clone(),
        waiter.pid.map(|p| format!("pid {p}")),
        waiter.note.as_deref().map(shortened),
    ]
    .into_iter()
    .flatten()
    .collect();
    let since = waiter
        .since_ms
        .map(|since| format!(" — since {} ({} ago)", timestamp(since), age(since)))
        .unwrap_or_default();
    format!("{}{since}", who.join(" · "))
}

/// An election's leader: its value, term, and since when it leads.
fn leader_rows(t: &mut Table, leader: &LeaderInfo) {
    t.add_row(vec!["leader".into(), leader.value.clone()]);
    t.add_row(vec!["term".into(), leader.term.to_string()]);
    if let Some(since) = leader.since_ms {
        t.add_row(vec![
            "leads since".into(),
            format!("{} ({} ago)", timestamp(since), age(since)),
        ]);
    }
}

/// What the holder said about itself (its [`description`]'s fields that are there), and on
/// PostgreSQL's advisory locks the session that holds it.
fn holder_rows(t: &mut Table, holder: &Holder) {
    let fields = description(holder);
    for (name, value) in [
        ("holder host", field(&fields, "host")),
        ("holder pid", number(&fields, "pid").map(|p| p.to_string())),
        ("holder label", field(&fields, "label")),
        (
            "held since",
            number(&fields, "since_ms").map(|s| format!("{} ({} ago)", timestamp(s), age(s))),
        ),
        ("holder note", field(&fields, "note")),
        (
            "backend pid",
            number(&fields, "backend_pid").map(|p| p.to_string()),
        ),
        ("application", field(&fields, "application_name")),
        ("client", field(&fields, "client_addr")),
        ("user", field(&fields, "user")),
        (
            "session since",
            number(&fields, "session_since_ms")
                .map(|s| format!("{} ({} ago)", timestamp(s), age(s))),
        ),
        ("session state", field(&fields, "state")),
        ("lock mode", field(&fields, "mode")),
    ] {
        if let Some(value) = value {
            t.add_row(vec![name.to_owned(), value]);
        }
    }
}

/// The shared kinds' members: a read-write lock's readers (and writers waiting), a
/// semaphore's permits and holders.
fn share_rows(t: &mut Table, lock: &LockInfo) {
    if let Some(readers) = &lock.readers {
        member_rows(t, "readers", readers);
        if lock.queued > 0 {
            t.add_row(vec!["writers waiting".into(), lock.queued.to_string()]);
        }
    }
    if let Some(permits) = &lock.permits {
        let n = |v: Option<u64>| v.map_or_else(|| "?".into(), |n| n.to_string());
        t.add_row(vec![
            "permits".into(),
            format!("{} of {} in use", n(permits.used), n(permits.max)),
        ]);
        member_rows(t, "holders", &permits.holders);
    }
}

/// A fair lock's queue: its length, then its waiters first in line first.
fn fair_rows(t: &mut Table, lock: &LockInfo) {
    if !lock.fair_queue.is_empty() || lock.kind == "fair" {
        t.add_row(vec!["fair queue".into(), lock.queued.to_string()]);
        for (i, token) in lock.fair_queue.iter().enumerate() {
            t.add_row(vec![format!("  #{}", i + 1), token.clone()]);
        }
    }
}

/// Redlock: the quorum verdict, and one line per master (its token, TTL and fencing
/// counter, or why it did not answer).
fn quorum_rows(t: &mut Table, lock: &LockInfo) {
    if let Some(q) = &lock.quorum {
        t.add_row(vec![
            "quorum".into(),
            format!(
                "{} of {} masters hold it ({} needed, {} answered)",
                q.holding, q.masters, q.required, q.answered
            ),
        ]);
    }
    for node in &lock.nodes {
        let answer = if let Some(error) = &node.error {
            format!("no answer: {error}")
        } else if let Some(token) = &node.token {
            format!(
                "{token}{}, ttl {}, fencing token {}",
                // Another token than the quorum's (a name without a quorum has none).
                if node.agrees || !lock.is_held() {
                    ""
                } else {
                    " (another token)"
                },
                node.ttl_ms.map_or_else(|| "-".into(), ms),
                node.fencing_token
                    .map_or_else(|| "-".into(), |f| f.to_string())
            )
        } else {
            "not held".into()
        };
        t.add_row(vec![format!("  {}", node.node), answer]);
    }
}

/// A count line and one line per listed member.
fn member_rows(t: &mut Table, what: &str, members: &Members) {
    t.add_row(vec![what.to_owned(), members.count.to_string()]);
    for m in &members.shown {
        let permits = m
            .permits
            .map_or_else(String::new, |p| format!(", {p} permits"));
        t.add_row(vec![
            format!("  {}", m.token),
            format!("ttl {}{permits}", ms(m.ttl_ms)),
        ]);
    }
    let shown = members.shown.len() as u64;
    if members.count > shown {
        t.add_row(vec![
            "  ...".into(),
            format!("{} more", members.count - shown),
        ]);
    }
}

/// The `leader` table: the election's name, the leader's term, its value and since when it
/// leads (wall clock, Unix milliseconds; `None` when it wrote no record).
pub(crate) fn leader_table(name: &str, term: u64, value: &str, since_ms: Option<u64>) -> Table {
    let mut t = table(&["FIELD", "VALUE"]);
    t.add_row(vec!["election".to_owned(), name.to_owned()]);
    t.add_row(vec!["term".to_owned(), term.to_string()]);
    t.add_row(vec!["value".to_owned(), value.to_owned()]);
    let since = since_ms.map_or_else(
        || "-".to_owned(),
        |ms| format!("{} ({} ago)", timestamp(ms), age(ms)),
    );
    t.add_row(vec!["since".to_owned(), since]);
    t
}

/// Milliseconds, short: `850ms`, `29.5s`, `4m 10s`.
pub(crate) fn ms(ms: i64) -> String {
    let Ok(ms) = u64::try_from(ms) else {
        return "-".into();
    };
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{}s", ms / 1000, ms % 1000 / 100)
    } else {
        humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
    }
}

/// How long ago the Unix-millisecond time `since` was, in whole seconds.
fn age(since: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(Duration::from_secs(now.saturating_sub(since) / 1000)).to_string()
}

/// A Unix-millisecond time in RFC 3339 (UTC).
fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}
