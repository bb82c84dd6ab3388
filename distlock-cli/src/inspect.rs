//! What reading a store yields, the same shape on every backend ([`LockInfo`], [`Listing`]):
//! `ls`, `show`, `watch`, the JSON documents and the web console print these whatever the
//! store. Each backend crate reads its own layout (lock-core's `Inspect`, in its
//! `inspect.rs`); [`LockInfo::from_held`] turns what it reads into what the command prints.

use lock_core::backend::{HeldKind, HeldLock, Holder, HolderView};
use serde::{Serialize, Serializer};

/// One held lock of one kind.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LockInfo {
    /// The name, without the prefix.
    pub(crate) name: String,
    /// The Redis key of the name.
    pub(crate) key: String,
    /// `mutex`, `fair`, `read-write`, `semaphore`, or `foreign` (a string key with a TTL that
    /// another client wrote).
    pub(crate) kind: &'static str,
    /// The holder's token: the mutex key's value, or the writer's.
    pub(crate) token: Option<String>,
    /// The holding key's remaining TTL in milliseconds.
    pub(crate) ttl_ms: Option<i64>,
    /// The last fencing token issued for the name (its counter), if kept.
    pub(crate) fencing_token: Option<u64>,
    /// Connections subscribed to the release channel: waiting processes.
    pub(crate) waiters: u64,
    /// Fair waiters in the queue, or writers recorded as waiting.
    pub(crate) queued: u64,
    /// The read-write lock's readers (count and the first few).
    pub(crate) readers: Option<Members>,
    /// The semaphore's permits: max, used, holders.
    pub(crate) permits: Option<Permits>,
    /// The fair queue, first in line first.
    pub(crate) fair_queue: Vec<String>,
    /// What the holder said about itself (its grant's note), as lock-redis reads it; shown as
    /// [`description`].
    #[serde(serialize_with = "serialize_holder")]
    pub(crate) holder: Option<Holder>,
    /// How the store holds it, as its backend read it (a read-write row is held by readers or
    /// by its writer); `None` for a row read otherwise.
    #[serde(skip)]
    pub(crate) hold: Option<HeldKind>,
    /// When the holder was granted the lock (Unix ms), where the store records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) since_ms: Option<u64>,
    /// The holder's lock-delay (ms), from its description (`distlock run --lock-delay`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lock_delay_ms: Option<u64>,
    /// When the holder's lease is over and its lock-delay keeps the name: until when (Unix
    /// ms, this machine's clock), so nobody is granted it before then. `None` otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) delayed_until_ms: Option<u64>,
    /// A request pending for this hold to give the lock up (`distlock revoke`), as its record
    /// in the store says; `None` when nobody asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) revocation: Option<Revocation>,
    /// The waiters that describe themselves (`distlock run`, `LockRequest::describe_waiter`),
    /// longest waiting first (`waiters::fold`); empty when none does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) waiting: Vec<WaiterInfo>,
    /// A latch's or a barrier's count (kind `latch` or `barrier`), folded from its records
    /// (`coordination::fold`); `None` for a lock.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) coordination: Option<CoordinationInfo>,
    /// The master it lives on (`host:port`), or the store's members.
    pub(crate) node: String,
    /// When the holder is a leader (its note is an election's record): the election's leader.
    pub(crate) leader: Option<LeaderInfo>,
    /// Redlock: the quorum verdict (how many masters hold this token, of how many, and how
    /// many make a quorum); absent on other stores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) quorum: Option<Quorum>,
    /// Redlock, `show`: each master's own answer for the name; empty (and absent from JSON)
    /// elsewhere.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) nodes: Vec<NodeAnswer>,
}

/// The kind of a Redlock name some masters hold but no quorum does (with the same token):
/// not a held lock, shown by `show` for its per-master rows.
pub(crate) const NO_QUORUM: &str = "no-quorum";

/// A Redlock lock's quorum verdict.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Quorum {
    /// Masters that hold the name with this token.
    pub(crate) holding: usize,
    /// Masters needed (`N/2 + 1`).
    pub(crate) required: usize,
    /// Masters given (`N`).
    pub(crate) masters: usize,
    /// Masters that answered the read.
    pub(crate) answered: usize,
}

/// A duration in whole milliseconds, as the JSON documents give TTLs.
fn millis(duration: Option<std::time::Duration>) -> Option<i64> {
    duration.map(|t| i64::try_from(t.as_millis()).unwrap_or(i64::MAX))
}

/// One Redlock master's answer for a name.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NodeAnswer {
    /// The master (`host:port`).
    pub(crate) node: String,
    /// The token its key holds, if any.
    pub(crate) token: Option<String>,
    /// Its key's remaining TTL in milliseconds.
    pub(crate) ttl_ms: Option<i64>,
    /// Its fencing counter for the name (the last token it issued).
    pub(crate) fencing_token: Option<u64>,
    /// Whether it holds the quorum's token.
    pub(crate) agrees: bool,
    /// Why it gave no answer (down, slow), on one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
}

impl NodeAnswer {
    /// What the command prints of one member's answer.
    fn from_member(member: lock_core::backend::MemberAnswer) -> Self {
        Self {
            ttl_ms: millis(member.ttl),
            node: member.member,
            token: member.token,
            fencing_token: member.fencing_token,
            agrees: member.agrees,
            error: member.error,
        }
    }
}

/// An election's leader, read from the record it wrote beside its grant
/// (`lock_core::Leader::from_record`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LeaderInfo {
    /// The term: the fencing token of the leader's grant.
    pub(crate) term: u64,
    /// The value the leader campaigned with (lossy UTF-8).
    pub(crate) value: String,
    /// When it was elected, by its own wall clock (Unix ms).
    pub(crate) since_ms: Option<u64>,
}

impl LockInfo {
    /// What the command prints of a hold a backend's inspector read.
    pub(crate) fn from_held(held: HeldLock) -> Self {
        let first = held.holders.first().cloned();
        let quorum_holds = held.is_held();
        let members = |holders: &[HolderView], count: u64| Members {
            count,
            shown: holders
                .iter()
                .map(|h| Member {
                    token: h.token.clone(),
                    ttl_ms: millis(h.ttl).unwrap_or(-1),
                    permits: h.permits,
                })
                .collect(),
        };
        let exclusive = matches!(
            held.kind,
            HeldKind::Mutex
                | HeldKind::Fair
                | HeldKind::Write
                | HeldKind::Session
                | HeldKind::Foreign
        );
        let mut info = LockInfo {
            kind: kind_word(held.kind),
            hold: Some(held.kind),
            waiters: held.waiters,
            queued: held.queued,
            fair_queue: held.queue,
            fencing_token: held.last_fencing_token,
            node: held.node,
            quorum: held.quorum.map(|q| Quorum {
                holding: q.holding,
                required: q.required,
                masters: q.members,
                answered: q.answered,
            }),
            nodes: held
                .members
                .into_iter()
                .map(NodeAnswer::from_member)
                .collect(),
            ..LockInfo::default()
        };
        match held.kind {
            HeldKind::Read => info.readers = Some(members(&held.holders, held.holder_count)),
            // A writer's read-write row says it has no readers.
            HeldKind::Write => info.readers = Some(members(&[], 0)),
            HeldKind::Semaphore => {
                info.permits = Some(Permits {
                    max: held.max_permits,
                    used: held.permits_used,
                    holders: members(&held.holders, held.holder_count),
                });
            }
            _ => {}
        }
        if exclusive && let Some(first) = first {
            info.hold_by(first, held.last_fencing_token);
        }
        if !quorum_holds {
            info.kind = NO_QUORUM;
        }
        info.name = held.name;
        info.key = held.key;
        info
    }

    /// Fills in an exclusive hold's holder: its token, TTL, since when, and what it said about
    /// itself (shown only when it said something). `last_fencing_token`: the name's counter,
    /// when the holder's own fencing token is not known.
    fn hold_by(&mut self, first: HolderView, last_fencing_token: Option<u64>) {
        self.ttl_ms = millis(first.ttl);
        self.since_ms = first.since.and_then(|since| {
            since
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| u64::try_from(d.as_millis()).ok())
        });
        self.holder = first.note.map(|note| {
            Holder::new(
                first.fencing_token.or(last_fencing_token).unwrap_or(0),
                first.ttl,
            )
            .with_note(note)
        });
        self.token = Some(first.token);
        self.lock_delay_ms = self
            .holder
            .as_ref()
            .and_then(|holder| description(holder).get("lock_delay_ms")?.as_u64());
        self.delayed_until_ms = delayed_until(self.ttl_ms, self.lock_delay_ms, now_ms());
    }

    /// Whether this is a held lock (not a Redlock name without a quorum, [`NO_QUORUM`]).
    pub(crate) fn is_held(&self) -> bool {
        self.kind != NO_QUORUM
    }

    /// Marks a mutex whose holder wrote an election's record as the election it is: kind
    /// `election`, with its leader.
    pub(crate) fn find_election(&mut self) {
        if self.kind != "mutex" {
            return;
        }
        let Some(leader) = self
            .holder
            .as_ref()
            .and_then(lock_core::Leader::from_record)
        else {
            return;
        };
        self.kind = "election";
        self.leader = Some(LeaderInfo {
            term: leader.term(),
            value: String::from_utf8_lossy(leader.value()).into_owned(),
            since_ms: leader.since().and_then(|since| {
                since
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok()
                    .and_then(|d| u64::try_from(d.as_millis()).ok())
            }),
        });
    }
}

/// The command's word for a kind (a read-write lock is one row, held by readers or by its
/// writer).
fn kind_word(kind: HeldKind) -> &'static str {
    match kind {
        HeldKind::Read | HeldKind::Write => "read-write",
        HeldKind::Session => "advisory",
        other => other.as_str(),
    }
}

/// Members of a sorted set scored by expiry: readers, semaphore holders.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Members {
    pub(crate) count: u64,
    pub(crate) shown: Vec<Member>,
}

/// One reader or semaphore holder.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Member {
    pub(crate) token: String,
    /// Until its share expires, in milliseconds (server clock).
    pub(crate) ttl_ms: i64,
    /// Permits it holds (semaphores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) permits: Option<u64>,
}

/// A semaphore's counts.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Permits {
    pub(crate) max: Option<u64>,
    pub(crate) used: Option<u64>,
    pub(crate) holders: Members,
}

/// A latch's or a barrier's count, read from its records.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct CoordinationInfo {
    /// A latch's count-downs to wait for, or a barrier's parties.
    pub(crate) count: u64,
    /// Parties present now (renewed leases): a latch's that have not counted down, a
    /// barrier's members in.
    pub(crate) present: u64,
    /// A latch's count-downs made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) counted_down: Option<u64>,
    /// A latch's parties that left without counting down (their lease ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) lost: Option<u64>,
    /// A latch's parties that joined it (present, counted down or lost).
    #[serde(skip)]
    pub(crate) joined: u64,
    /// A barrier's members that passed it and have not left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) passed: Option<u64>,
    /// `open`, `broken` (a latch a party left without counting down), `waiting` (a latch) or
    /// `filling` (a barrier).
    pub(crate) state: &'static str,
}

impl CoordinationInfo {
    /// The one-line summary of `ls`'s HOLDER column and `show`.
    pub(crate) fn summary(&self) -> String {
        let (count, present) = (self.count, self.present);
        match (self.counted_down, self.passed) {
            (Some(done), _) => {
                let lost = match self.lost {
                    Some(lost) if lost > 0 => format!(", {lost} lost"),
                    _ => String::new(),
                };
                format!(
                    "{done}/{count} counted down, {present} present{lost} ({})",
                    self.state
                )
            }
            (None, passed) => format!(
                "{present}/{count} in, {} passed ({})",
                passed.unwrap_or(0),
                self.state
            ),
        }
    }
}

/// A waiter, as its record describes it (the fields `distlock run` writes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct WaiterInfo {
    /// Its host.
    pub(crate) host: Option<String>,
    /// Its process id.
    pub(crate) pid: Option<u64>,
    /// Its note (`--note`, or the command), or the description itself when it is not JSON.
    pub(crate) note: Option<String>,
    /// Since when it waits (Unix ms, its own clock).
    pub(crate) since_ms: Option<u64>,
}

/// A revocation request for a hold (`Locker::revoke`): the grant it asks, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Revocation {
    /// The fencing token of the grant asked.
    pub(crate) fencing_token: u64,
    /// The revoker's note.
    pub(crate) note: Option<String>,
}

/// The suffix of a revocation request's record, and of its bell (lock-core's `revoke.rs`).
const RECORD: &str = ":distlock-revoke:";
const BELL: &str = ":distlock-revoke-bell:";

/// The lock name and fencing token a revocation record's name (`NAME:distlock-revoke:TOKEN`)
/// names.
fn revocation_record(name: &str) -> Option<(&str, u64)> {
    let (base, token) = name.rsplit_once(RECORD)?;
    Some((base, token.parse().ok()?))
}

/// The fencing tokens a hold may be asked by: its holder's, or the name's last issued.
fn hold_tokens(lock: &LockInfo) -> [Option<u64>; 2] {
    [
        lock.holder.as_ref().map(|h| h.fencing_token),
        lock.fencing_token,
    ]
}

/// Folds the revocation records (and their bells) of a listing into the holds they ask: a
/// record is not a lock of its own to an operator, but a request pending for one. A record
/// for an earlier grant of the name (its holder gone) is dropped with it.
pub(crate) fn fold_revocations(locks: &mut Vec<LockInfo>) {
    let mut asked: Vec<(String, Revocation)> = Vec::new();
    locks.retain(|lock| {
        if let Some((base, token)) = revocation_record(&lock.name) {
            asked.push((
                base.to_owned(),
                Revocation {
                    fencing_token: token,
                    note: record_note(lock),
                },
            ));
            return false;
        }
        !lock.name.contains(BELL)
    });
    for (base, revocation) in asked {
        if let Some(lock) = locks
            .iter_mut()
            .find(|l| l.name == base && hold_tokens(l).contains(&Some(revocation.fencing_token)))
        {
            lock.revocation = Some(revocation);
        }
    }
}

/// The note a revocation record's grant carries.
pub(crate) fn record_note(record: &LockInfo) -> Option<String> {
    let holder = record.holder.as_ref()?;
    description(holder)
        .get("note")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

/// The name of the record that would ask `lock`'s holder to give it up, and the fencing
/// token it names.
pub(crate) fn revocation_record_of(lock: &LockInfo) -> Option<(String, u64)> {
    let token = hold_tokens(lock).into_iter().flatten().next()?;
    Some((format!("{}{RECORD}{token}", lock.name), token))
}

/// Until when a lock-delay keeps a name whose holder's lease is over (Unix ms), given the
/// store's TTL left (`ttl_ms`, the lease plus the delay) and the holder's lock-delay: `None`
/// while the lease itself runs (more than the delay left), or without a delay or a TTL.
pub(crate) fn delayed_until(
    ttl_ms: Option<i64>,
    lock_delay_ms: Option<u64>,
    now_ms: u64,
) -> Option<u64> {
    let left = u64::try_from(ttl_ms?).ok()?;
    (left <= lock_delay_ms?).then_some(now_ms.saturating_add(left))
}

/// This machine's wall clock in Unix milliseconds.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A holder's description as fields: the JSON object a grant with holder metadata writes
/// (`host`, `pid`, `note`, `since_ms`, `token`; `label` from older writers), or else its note
/// as text under `note`.
pub(crate) fn description(holder: &Holder) -> serde_json::Map<String, serde_json::Value> {
    let Some(note) = &holder.note else {
        return serde_json::Map::new();
    };
    match serde_json::from_slice(note) {
        Ok(serde_json::Value::Object(fields)) => fields,
        _ => serde_json::Map::from_iter([(
            "note".to_owned(),
            String::from_utf8_lossy(note).into_owned().into(),
        )]),
    }
}

/// `--json`: the holder as its [`description`]'s fields.
fn serialize_holder<S: Serializer>(holder: &Option<Holder>, out: S) -> Result<S::Ok, S::Error> {
    holder.as_ref().map(description).serialize(out)
}

/// What `ls` found.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Listing {
    pub(crate) locks: Vec<LockInfo>,
    /// Keys SCAN returned, over every master.
    pub(crate) keys_scanned: u64,
    /// Whether a master's walk stopped at the step limit.
    pub(crate) truncated: bool,
}

impl Listing {
    /// What the command prints of a backend inspector's listing.
    pub(crate) fn from_held(listing: lock_core::backend::Listing) -> Self {
        Self {
            locks: listing.locks.into_iter().map(LockInfo::from_held).collect(),
            keys_scanned: listing.scanned,
            truncated: listing.truncated,
        }
    }
}

#[cfg(test)]
mod revocation_tests {
    use super::{LockInfo, fold_revocations};

    fn lock(name: &str, fencing_token: u64) -> LockInfo {
        LockInfo {
            name: name.to_owned(),
            kind: "mutex",
            fencing_token: Some(fencing_token),
            ..LockInfo::default()
        }
    }

    #[test]
    fn records_fold_into_the_hold_they_ask_and_stale_ones_and_bells_go() {
        let mut locks = vec![
            lock("job", 7),
            lock("job:distlock-revoke:7", 1),
            lock("job:distlock-revoke-bell:7", 2),
            lock("other", 9),
            // For an earlier grant of `other`: nobody to ask any more.
            lock("other:distlock-revoke:8", 3),
        ];
        fold_revocations(&mut locks);
        let names: Vec<&str> = locks.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["job", "other"]);
        assert_eq!(
            locks[0].revocation.as_ref().map(|r| r.fencing_token),
            Some(7)
        );
        assert!(locks[1].revocation.is_none());
    }
}
