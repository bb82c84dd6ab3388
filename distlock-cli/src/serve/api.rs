//! The JSON documents of `/api/locks` and `/api/elections`, built from one snapshot at the
//! time of the request (hold ages and TTLs are counted to then).

use serde::Serialize;

use super::auth::{Access, mask};
use super::snapshot::{Held, View, now_ms};
use crate::inspect::description;

/// What both documents start with: the snapshot's state and the server's settings.
#[derive(Debug, Serialize)]
pub(crate) struct Header {
    /// The store's backend (`redis`, `etcd`, ...).
    backend: &'static str,
    /// Whether the last sweep succeeded.
    up: bool,
    /// The last sweep's failure, when it failed (the locks are then the last good snapshot's).
    error: Option<ErrorItem>,
    /// When the snapshot served was taken (Unix ms; `null` before the first good sweep).
    taken_ms: Option<u64>,
    /// How old it is (ms).
    age_ms: Option<u64>,
    /// How long its sweep took (ms).
    sweep_ms: Option<u64>,
    /// Whether the store's walk stopped at its step limit.
    truncated: bool,
    refresh_ms: u64,
    stuck_after_ms: u64,
    /// Whether the request carried the bearer token (tokens are then in full).
    authenticated: bool,
    /// Whether `POST /api/release` is on (`--allow-release`).
    allow_release: bool,
    /// Whether the API requires a bearer token (`--auth-token-file`).
    auth_required: bool,
}

/// A failed sweep.
#[derive(Debug, Serialize)]
struct ErrorItem {
    message: String,
    at_ms: u64,
}

/// One held lock in `/api/locks`.
#[derive(Debug, Serialize)]
pub(crate) struct LockItem<'a> {
    name: &'a str,
    kind: &'a str,
    holder: HolderItem,
    /// How long it is held, to the request's time (ms).
    held_for_ms: u64,
    /// Since when (Unix ms).
    held_since_ms: u64,
    /// `holder` (its own word) or `first_seen` (by this server: a lower bound).
    held_since: &'static str,
    /// What is left of its lease at the request's time (ms); `null` when it has no TTL.
    ttl_ms: Option<i64>,
    /// The holder's lock-delay (ms), from its description; `null` without one.
    lock_delay_ms: Option<u64>,
    /// When the holder's lease is over and its lock-delay keeps the name: until when (Unix
    /// ms); `null` otherwise.
    delayed_until_ms: Option<u64>,
    fencing_token: Option<u64>,
    /// Waiting processes (subscribed to its releases).
    waiters: u64,
    /// Fair waiters queued, or writers waiting.
    queued: u64,
    /// A read-write lock's readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    readers: Option<u64>,
    /// A semaphore's permits.
    #[serde(skip_serializing_if = "Option::is_none")]
    permits: Option<PermitsItem>,
    /// The holder's token (masked unless the request is authenticated).
    token: Option<String>,
    /// A request pending for the holder to give it up (`distlock revoke`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    revocation: Option<&'a crate::inspect::Revocation>,
    /// The waiters that describe themselves, longest waiting first (`host`, `pid`, `note`,
    /// `since_ms`).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    waiting: &'a [crate::inspect::WaiterInfo],
    /// A latch's or a barrier's count (kinds `latch` and `barrier`), with its `summary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    coordination: Option<CoordinationItem<'a>>,
    /// Held longer than `--stuck-after`.
    stuck: bool,
    /// Where it lives (the master, or the store's members).
    node: &'a str,
}

/// The holder's description (`null` fields when it wrote none).
#[derive(Debug, Default, Serialize)]
struct HolderItem {
    host: Option<String>,
    pid: Option<u64>,
    note: Option<String>,
    since_ms: Option<u64>,
}

/// A latch's or a barrier's count, and the line `ls` prints of it.
#[derive(Debug, Serialize)]
struct CoordinationItem<'a> {
    #[serde(flatten)]
    info: &'a crate::inspect::CoordinationInfo,
    summary: String,
}

/// A semaphore's permits.
#[derive(Debug, Serialize)]
struct PermitsItem {
    max: Option<u64>,
    used: Option<u64>,
    holders: u64,
}

/// One election in `/api/elections`.
#[derive(Debug, Serialize)]
pub(crate) struct ElectionItem<'a> {
    name: &'a str,
    leader: LeaderItem,
    held_for_ms: u64,
    ttl_ms: Option<i64>,
    waiters: u64,
    token: Option<String>,
    stuck: bool,
}

/// An election's leader.
#[derive(Debug, Serialize)]
struct LeaderItem {
    value: String,
    term: u64,
    since_ms: Option<u64>,
}

/// `/api/locks`.
#[derive(Debug, Serialize)]
pub(crate) struct LocksDoc<'a> {
    #[serde(flatten)]
    header: Header,
    locks: Vec<LockItem<'a>>,
}

/// `/api/elections`.
#[derive(Debug, Serialize)]
pub(crate) struct ElectionsDoc<'a> {
    #[serde(flatten)]
    header: Header,
    elections: Vec<ElectionItem<'a>>,
}

/// The server's settings the documents carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) backend: &'static str,
    pub(crate) refresh_ms: u64,
    pub(crate) stuck_after_ms: u64,
    pub(crate) allow_release: bool,
    pub(crate) auth_required: bool,
}

impl Header {
    fn new(view: &View, settings: Settings, access: Access, now: u64) -> Self {
        let snapshot = view.snapshot.as_deref();
        Self {
            backend: settings.backend,
            up: view.up(),
            error: view.error.as_deref().map(|e| ErrorItem {
                message: e.message.clone(),
                at_ms: e.at_ms,
            }),
            taken_ms: snapshot.map(|s| s.taken_ms),
            age_ms: snapshot.map(|s| now.saturating_sub(s.taken_ms)),
            sweep_ms: snapshot.map(|s| u64::try_from(s.sweep.as_millis()).unwrap_or(u64::MAX)),
            truncated: snapshot.is_some_and(|s| s.truncated),
            refresh_ms: settings.refresh_ms,
            stuck_after_ms: settings.stuck_after_ms,
            authenticated: access.authenticated,
            allow_release: settings.allow_release,
            auth_required: settings.auth_required,
        }
    }
}

/// The held locks but elections.
pub(crate) fn locks<'a>(view: &'a View, settings: Settings, access: Access) -> LocksDoc<'a> {
    let now = now_ms();
    let age = view
        .snapshot
        .as_deref()
        .map_or(0, |s| now.saturating_sub(s.taken_ms));
    let locks = held(view)
        .filter(|h| h.info.kind != "election")
        .map(|h| {
            let info = &h.info;
            let held_for_ms = now.saturating_sub(h.since_ms);
            LockItem {
                name: &info.name,
                kind: info.kind,
                holder: holder_item(h),
                held_for_ms,
                held_since_ms: h.since_ms,
                held_since: h.since_source,
                ttl_ms: ttl_now(lease_left(info), age),
                lock_delay_ms: info.lock_delay_ms,
                delayed_until_ms: crate::inspect::delayed_until(
                    ttl_now(lease_left(info), age),
                    info.lock_delay_ms,
                    now,
                ),
                fencing_token: info.fencing_token,
                waiters: info.waiters,
                queued: info.queued,
                readers: info.readers.as_ref().map(|r| r.count),
                permits: info.permits.as_ref().map(|p| PermitsItem {
                    max: p.max,
                    used: p.used,
                    holders: p.holders.count,
                }),
                token: shown_token(info.token.as_deref(), access),
                revocation: info.revocation.as_ref(),
                waiting: &info.waiting,
                coordination: info.coordination.as_ref().map(|c| CoordinationItem {
                    info: c,
                    summary: c.summary(),
                }),
                stuck: held_for_ms > settings.stuck_after_ms,
                node: &info.node,
            }
        })
        .collect();
    LocksDoc {
        header: Header::new(view, settings, access, now),
        locks,
    }
}

/// The elections.
pub(crate) fn elections<'a>(
    view: &'a View,
    settings: Settings,
    access: Access,
) -> ElectionsDoc<'a> {
    let now = now_ms();
    let age = view
        .snapshot
        .as_deref()
        .map_or(0, |s| now.saturating_sub(s.taken_ms));
    let elections = held(view)
        .filter_map(|h| {
            let leader = h.info.leader.as_ref()?;
            let held_for_ms = now.saturating_sub(h.since_ms);
            Some(ElectionItem {
                name: &h.info.name,
                leader: LeaderItem {
                    value: leader.value.clone(),
                    term: leader.term,
                    since_ms: leader.since_ms,
                },
                held_for_ms,
                ttl_ms: ttl_now(h.info.ttl_ms, age),
                waiters: h.info.waiters,
                token: shown_token(h.info.token.as_deref(), access),
                stuck: held_for_ms > settings.stuck_after_ms,
            })
        })
        .collect();
    ElectionsDoc {
        header: Header::new(view, settings, access, now),
        elections,
    }
}

/// The snapshot's locks (none before the first good sweep).
fn held(view: &View) -> impl Iterator<Item = &Held> {
    view.snapshot.iter().flat_map(|s| s.locks.iter())
}

/// What is left of the lock's lease: its key's TTL, or for a semaphore or a read-write lock
/// held by readers only, the longest of its holders' shares (those listed).
fn lease_left(info: &crate::inspect::LockInfo) -> Option<i64> {
    let members = info
        .permits
        .as_ref()
        .map(|p| &p.holders)
        .or(info.readers.as_ref());
    info.ttl_ms
        .or_else(|| members.and_then(|m| m.shown.iter().map(|h| h.ttl_ms).max()))
}

/// The TTL read `age` ms ago, counted down to now (not below 0).
fn ttl_now(ttl_ms: Option<i64>, age: u64) -> Option<i64> {
    ttl_ms.map(|t| {
        t.saturating_sub(i64::try_from(age).unwrap_or(i64::MAX))
            .max(0)
    })
}

/// The token as this request may see it.
fn shown_token(token: Option<&str>, access: Access) -> Option<String> {
    token.map(|t| {
        if access.authenticated {
            t.to_owned()
        } else {
            mask(t)
        }
    })
}

/// The holder's description as the API's fields.
fn holder_item(held: &Held) -> HolderItem {
    let Some(holder) = held.info.holder.as_ref() else {
        return HolderItem::default();
    };
    let fields = description(holder);
    let text = |key: &str| {
        fields.get(key).and_then(|v| match v {
            serde_json::Value::Null => None,
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        })
    };
    HolderItem {
        host: text("host"),
        pid: fields.get("pid").and_then(serde_json::Value::as_u64),
        note: text("note").or_else(|| text("label")),
        since_ms: fields.get("since_ms").and_then(serde_json::Value::as_u64),
    }
}
