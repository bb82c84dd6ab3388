//! What `serve` saw over time: the holds of each lock (who, from when to when, and how each
//! ended as far as the sweeps tell) and the length of its waiting line, for the last
//! `--history` (15 minutes by default), bounded in memory: at most [`MAX_HOLDS`] holds and,
//! for at most [`MAX_LINES`] names, [`MAX_POINTS`] changes of their waiting line each — about
//! 2 MB of holds and 8 MB of lines at the very most. `/api/history` serves it and the page draws it.
//!
//! A sweep sees holds, not grants: a hold shorter than `--refresh` between two sweeps is not
//! seen at all, and a hold's end is known to within one refresh. How a hold ended is inferred:
//! `expired` when its TTL was about to run out at the last sweep that saw it (within one and a
//! half refreshes), `released` otherwise.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use serde::Serialize;

use super::snapshot::{Held, Snapshot};
use crate::inspect::description;

/// The most holds kept (open ones and ended ones within the window).
pub(crate) const MAX_HOLDS: usize = 10_000;
/// The most names whose waiting line is kept.
pub(crate) const MAX_LINES: usize = 500;
/// The most changes of one name's waiting line kept.
pub(crate) const MAX_POINTS: usize = 1_000;

/// One hold as the sweeps saw it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Hold {
    name: String,
    kind: &'static str,
    /// `host · pid N`, from the holder's description (or an election's leader value).
    who: Option<String>,
    /// The holder's note.
    note: Option<String>,
    /// When it began (Unix ms): the holder's word, else the first sweep that saw it.
    from_ms: u64,
    /// When it ended (Unix ms): the first sweep that no longer saw it; `null` while held.
    to_ms: Option<u64>,
    /// `released` or `expired` (inferred, see the module's docs); `null` while held.
    ended: Option<&'static str>,
    #[serde(skip)]
    token: Option<String>,
    #[serde(skip)]
    last_ttl_ms: Option<i64>,
}

/// The waiting line of one name over time: `(Unix ms, waiters)` at each change.
#[derive(Debug, Default)]
struct Line {
    points: VecDeque<(u64, u64)>,
}

/// The history of one `serve`.
#[derive(Debug)]
pub(crate) struct History {
    window: Duration,
    refresh_ms: u64,
    holds: VecDeque<Hold>,
    lines: HashMap<(String, &'static str), Line>,
}

/// `/api/history`.
#[derive(Debug, Serialize)]
pub(crate) struct HistoryDoc {
    window_ms: u64,
    now_ms: u64,
    holds: Vec<Hold>,
    waiting: Vec<WaitingLine>,
    contended: Vec<Contended>,
}

/// One name's waiting line in `/api/history`.
#[derive(Debug, Serialize)]
struct WaitingLine {
    name: String,
    kind: &'static str,
    /// `[Unix ms, waiters]` at each change, oldest first (the first may be before the window:
    /// the line's length when the window began).
    points: Vec<(u64, u64)>,
}

/// A name by how long its waiters waited in the window.
#[derive(Debug, Serialize)]
struct Contended {
    name: String,
    kind: &'static str,
    /// Waiters × seconds over the window (two waiters for 3 s is 6).
    waiter_seconds: f64,
    /// The longest the line was.
    max_waiters: u64,
}

impl History {
    /// An empty history of `window`, fed every `refresh`.
    pub(crate) fn new(window: Duration, refresh: Duration) -> Self {
        Self {
            window,
            refresh_ms: u64::try_from(refresh.as_millis()).unwrap_or(u64::MAX),
            holds: VecDeque::new(),
            lines: HashMap::new(),
        }
    }

    /// Takes in one sweep's snapshot.
    pub(crate) fn record(&mut self, snapshot: &Snapshot) {
        let now = snapshot.taken_ms;
        let seen: HashMap<(&str, &str, Option<&str>), &Held> = snapshot
            .locks
            .iter()
            .map(|h| {
                (
                    (h.info.name.as_str(), h.info.kind, h.info.token.as_deref()),
                    h,
                )
            })
            .collect();
        let expiring = self.refresh_ms.saturating_mul(3) / 2;
        let mut open = std::collections::HashSet::new();
        for hold in self.holds.iter_mut().filter(|h| h.to_ms.is_none()) {
            let key = (hold.name.as_str(), hold.kind, hold.token.as_deref());
            if let Some(held) = seen.get(&key) {
                hold.last_ttl_ms = held.info.ttl_ms;
                open.insert((hold.name.clone(), hold.kind, hold.token.clone()));
            } else {
                hold.to_ms = Some(now);
                let about_to_expire = hold
                    .last_ttl_ms
                    .is_some_and(|ttl| u64::try_from(ttl).unwrap_or(0) <= expiring);
                hold.ended = Some(if about_to_expire {
                    "expired"
                } else {
                    "released"
                });
            }
        }
        for held in &snapshot.locks {
            let info = &held.info;
            if !open.contains(&(info.name.clone(), info.kind, info.token.clone())) {
                self.holds.push_back(new_hold(held));
            }
            self.wait(
                now,
                info.name.as_str(),
                info.kind,
                info.waiters + info.queued,
            );
        }
        // A name no longer held has nobody waiting that the store shows.
        let gone: Vec<(String, &'static str)> = self
            .lines
            .keys()
            .filter(|(name, kind)| !seen.keys().any(|(n, k, _)| n == name && k == kind))
            .cloned()
            .collect();
        for (name, kind) in gone {
            self.wait(now, &name, kind, 0);
        }
        self.prune(now);
    }

    /// Notes `name`'s waiting line at `now`, if it changed.
    fn wait(&mut self, now: u64, name: &str, kind: &'static str, waiters: u64) {
        let key = (name.to_owned(), kind);
        if !self.lines.contains_key(&key) {
            if waiters == 0 || self.lines.len() >= MAX_LINES {
                return;
            }
            self.lines.insert(key.clone(), Line::default());
        }
        let Some(line) = self.lines.get_mut(&key) else {
            return;
        };
        if line.points.back().is_none_or(|&(_, n)| n != waiters) {
            line.points.push_back((now, waiters));
            if line.points.len() > MAX_POINTS {
                line.points.pop_front();
            }
        }
    }

    /// Drops what ended before the window, and the oldest holds past [`MAX_HOLDS`].
    fn prune(&mut self, now: u64) {
        let start = now.saturating_sub(u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX));
        self.holds.retain(|h| h.to_ms.is_none_or(|to| to >= start));
        while self.holds.len() > MAX_HOLDS {
            self.holds.pop_front();
        }
        self.lines.retain(|_, line| {
            // Keep the last point before the window: the line's length when it began.
            while line.points.len() > 1 && line.points[1].0 <= start {
                line.points.pop_front();
            }
            !(line.points.len() == 1 && line.points[0].1 == 0 && line.points[0].0 < start)
        });
    }

    /// The document `/api/history` serves at `now` (Unix ms).
    pub(crate) fn doc(&self, now: u64) -> HistoryDoc {
        let window_ms = u64::try_from(self.window.as_millis()).unwrap_or(u64::MAX);
        let start = now.saturating_sub(window_ms);
        let mut waiting = Vec::new();
        let mut contended = Vec::new();
        for ((name, kind), line) in &self.lines {
            let points: Vec<(u64, u64)> = line.points.iter().copied().collect();
            let (mut area_ms, mut max) = (0u128, 0u64);
            for (i, &(at, n)) in points.iter().enumerate() {
                let from = at.max(start);
                let to = points.get(i + 1).map_or(now, |next| next.0).max(from);
                area_ms += u128::from(n) * u128::from(to - from);
                if to > start {
                    max = max.max(n);
                }
            }
            if max > 0 {
                #[allow(clippy::cast_precision_loss, reason = "seconds to show, not to count")]
                contended.push(Contended {
                    name: name.clone(),
                    kind,
                    waiter_seconds: area_ms as f64 / 1000.0,
                    max_waiters: max,
                });
            }
            waiting.push(WaitingLine {
                name: name.clone(),
                kind,
                points,
            });
        }
        contended.sort_by(|a, b| b.waiter_seconds.total_cmp(&a.waiter_seconds));
        contended.truncate(20);
        waiting.sort_by(|a, b| a.name.cmp(&b.name));
        HistoryDoc {
            window_ms,
            now_ms: now,
            holds: self.holds.iter().cloned().collect(),
            waiting,
            contended,
        }
    }
}

/// A hold first seen in `held`.
fn new_hold(held: &Held) -> Hold {
    let info = &held.info;
    let fields = info.holder.as_ref().map(description).unwrap_or_default();
    let text = |key: &str| fields.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let who = match (
        &info.leader,
        text("host"),
        fields.get("pid").and_then(|p| p.as_u64()),
    ) {
        (Some(leader), _, _) => Some(leader.value.clone()),
        (None, Some(host), Some(pid)) => Some(format!("{host} · pid {pid}")),
        (None, Some(host), None) => Some(host),
        (None, None, Some(pid)) => Some(format!("pid {pid}")),
        (None, None, None) => None,
    };
    Hold {
        name: info.name.clone(),
        kind: info.kind,
        who,
        note: text("note"),
        from_ms: held.since_ms,
        to_ms: None,
        ended: None,
        token: info.token.clone(),
        last_ttl_ms: info.ttl_ms,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{History, MAX_HOLDS};
    use crate::inspect::LockInfo;
    use crate::serve::snapshot::{Held, Snapshot};

    /// A sweep at `at` that found `locks`: `(name, token, TTL left in ms, waiters)`.
    fn sweep(at: u64, locks: &[(&str, &str, i64, u64)]) -> Snapshot {
        Snapshot {
            locks: locks
                .iter()
                .map(|&(name, token, ttl, waiters)| Held {
                    info: LockInfo {
                        name: name.to_owned(),
                        kind: "mutex",
                        token: Some(token.to_owned()),
                        ttl_ms: Some(ttl),
                        waiters,
                        ..LockInfo::default()
                    },
                    since_ms: at,
                    since_source: "first_seen",
                })
                .collect(),
            truncated: false,
            taken_ms: at,
            sweep: Duration::ZERO,
        }
    }

    #[test]
    fn holds_open_end_and_say_how_and_waits_add_up() {
        let mut history = History::new(Duration::from_secs(900), Duration::from_secs(1));
        history.record(&sweep(0, &[("a", "t1", 30_000, 2), ("b", "u1", 5_000, 0)]));
        // a's first holder released with time left; b's ran out (1 s left at the last sweep).
        history.record(&sweep(
            1_000,
            &[("a", "t1", 29_000, 2), ("b", "u1", 1_000, 0)],
        ));
        history.record(&sweep(2_000, &[("a", "t2", 30_000, 0)]));
        let doc = history.doc(4_000);
        let ended: Vec<(&str, Option<u64>, Option<&str>)> = doc
            .holds
            .iter()
            .map(|h| (h.name.as_str(), h.to_ms, h.ended))
            .collect();
        assert_eq!(
            ended,
            vec![
                ("a", Some(2_000), Some("released")),
                ("b", Some(2_000), Some("expired")),
                ("a", None, None),
            ]
        );
        // Two waiters on a from 0 to 2 s: 4 waiter-seconds; nobody waited on b.
        assert_eq!(doc.contended.len(), 1);
        assert_eq!(doc.contended[0].name, "a");
        assert!((doc.contended[0].waiter_seconds - 4.0).abs() < 1e-9);
        assert_eq!(doc.contended[0].max_waiters, 2);
    }

    #[test]
    fn what_ended_before_the_window_goes_and_the_holds_stay_bounded() {
        let mut history = History::new(Duration::from_secs(10), Duration::from_secs(1));
        history.record(&sweep(0, &[("old", "t", 30_000, 1)]));
        history.record(&sweep(1_000, &[]));
        history.record(&sweep(20_000, &[("new", "t", 30_000, 0)]));
        let doc = history.doc(20_000);
        assert_eq!(doc.holds.len(), 1, "{:?}", doc.holds);
        assert!(doc.contended.is_empty(), "{:?}", doc.contended);
        for i in 0..(MAX_HOLDS as u64 + 10) {
            let token = format!("t{i}");
            history.record(&sweep(21_000 + i, &[("many", token.as_str(), 30_000, 0)]));
        }
        assert!(history.holds.len() <= MAX_HOLDS);
    }
}
