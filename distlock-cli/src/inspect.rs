//! Reading locks: one pipelined round of plain read commands per lock (MGET, PTTL, ZRANGE,
//! HGETALL, PUBSUB NUMSUB...) on the master that holds it, only those its kinds need, and the
//! SCAN walk that finds them (and tells which kinds' keys exist).

use std::collections::HashMap;

use lock_core::backend::Holder;
use lock_redis::{DerivedKey, HolderReplies, LockKeys, TOKEN_PREFIX};
use redis::Value;
use serde::{Serialize, Serializer};

use crate::connect::{Node, Target};
use crate::exit::{Failure, USAGE};

/// At most this many members of a readers' or holders' set are listed per lock (the count is
/// always exact).
const MEMBERS_SHOWN: isize = 50;

/// Locks described per pipelined round trip.
const BATCH: usize = 200;

/// The SCAN walk of one master stops after this many steps (COUNT keys each), so a listing
/// always ends; a keyspace that large is reported as cut short.
const MAX_SCAN_STEPS: u64 = 1_000_000;

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
    /// What the holder said about itself (its grant's note, or the previous release's
    /// description of its token), as lock-redis reads it; shown as [`description`].
    #[serde(serialize_with = "serialize_holder")]
    pub(crate) holder: Option<Holder>,
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

/// The holder of the lock key whose value is `at(1)`, read by lock-redis's one reader from the
/// replies of [`queue_reads`]; `None` when it said nothing about itself.
fn holder_of(at: impl Fn(usize) -> Option<Vec<u8>>, pttl_ms: i64) -> Option<Holder> {
    let (value, note, fence, legacy) = (at(1), at(16), at(3), at(4));
    HolderReplies {
        value: value.as_deref(),
        pttl_ms,
        note: note.as_deref(),
        fence: fence.as_deref(),
        legacy: legacy.as_deref(),
    }
    .holder()
    .filter(|holder| holder.note.is_some())
}

/// Every held lock (of every kind) named `key`, read in one round trip from its master.
pub(crate) async fn describe(target: &Target, key: &str) -> Result<Vec<LockInfo>, Failure> {
    let node = target.node_for(key)?;
    let name = key.strip_prefix(target.prefix.as_str()).unwrap_or(key);
    let mut found = describe_batch(
        node,
        target.cluster,
        &[(name.to_owned(), key.to_owned(), Seen::ALL)],
        true,
    )
    .await?;
    Ok(found.pop().unwrap_or_default())
}

/// Which of a lock's keys the SCAN walk saw: only the reads of the kinds seen are sent (a
/// mutex takes 3 commands, not 17), and a name with none of its holding keys (a released
/// lock's fencing counter) is not read at all. A key there for the whole walk is always seen
/// (SCAN's guarantee), so a lock held throughout is never missed.
#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    /// The lock key itself: a mutex, a fair lock, or another client's key.
    main: bool,
    /// The read-write lock's writer, readers or waiting writers.
    read_write: bool,
    /// The semaphore's holders or counts.
    semaphore: bool,
    /// The fair queue.
    fair: bool,
}

impl Seen {
    /// Every kind (`show`: nothing was walked).
    const ALL: Seen = Seen {
        main: true,
        read_write: true,
        semaphore: true,
        fair: true,
    };

    /// Whether a lock could be held: one of its holding keys was seen.
    fn any(self) -> bool {
        self.main || self.read_write || self.semaphore
    }

    /// Records the key `which` of the lock (`None`: the lock key itself).
    fn saw(&mut self, which: Option<DerivedKey>) {
        match which {
            None => self.main = true,
            Some(DerivedKey::Writer | DerivedKey::Readers | DerivedKey::WritersWaiting) => {
                self.read_write = true;
            }
            Some(DerivedKey::Permits | DerivedKey::PermitCounts) => self.semaphore = true,
            Some(DerivedKey::FairQueue | DerivedKey::FairEntries) => self.fair = true,
            Some(_) => {}
        }
    }
}

/// The commands that read one lock; [`replies_of`] puts their replies where [`read_one`]
/// takes them. The lock's string keys (the lock key, its fencing counter, the previous
/// holder's description, the grant's note: one cluster slot) are read with one `MGET` (a
/// non-string lock key reads as nil: not a mutex), then only the reads of the kinds `seen`:
/// a mutex costs 3 commands (`MGET`, `PTTL`, `PUBSUB NUMSUB`).
fn queue_reads(pipe: &mut redis::Pipeline, keys: &LockKeys, sharded: bool, seen: Seen) {
    pipe.cmd("MGET")
        .arg(&keys.key)
        .arg(&keys.fence)
        .arg(&keys.holder)
        .arg(&keys.note);
    if seen.main {
        pipe.cmd("PTTL").arg(&keys.key);
    }
    pipe.cmd("PUBSUB")
        .arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
        .arg(&keys.released);
    if seen.read_write {
        pipe.cmd("GET").arg(&keys.writer);
        pipe.cmd("PTTL").arg(&keys.writer);
        pipe.cmd("ZCARD").arg(&keys.readers);
        pipe.cmd("ZRANGE")
            .arg(&keys.readers)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1)
            .arg("WITHSCORES");
        pipe.cmd("ZCARD").arg(&keys.writers_waiting);
    }
    if seen.semaphore {
        pipe.cmd("ZCARD").arg(&keys.permits);
        pipe.cmd("ZRANGE")
            .arg(&keys.permits)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1)
            .arg("WITHSCORES");
        pipe.cmd("HGETALL").arg(&keys.permit_counts);
    }
    if seen.main && seen.fair {
        pipe.cmd("ZRANGE")
            .arg(&keys.fair_queue)
            .arg(0)
            .arg(MEMBERS_SHOWN - 1);
        pipe.cmd("ZCARD").arg(&keys.fair_queue);
    }
}

/// One lock's replies to [`queue_reads`], taken from `sent`, at the places [`read_one`] reads
/// them: 0 the lock key's type, 1 its value, 2 its PTTL, 3 the fencing counter, 4 the previous
/// holder's description, 5 the waiters, 6-10 the read-write lock's, 11-13 the semaphore's,
/// 14-15 the fair queue's, 16 the note; nil for what was not read.
fn replies_of(seen: Seen, sent: &mut impl Iterator<Item = Value>) -> Vec<Value> {
    let mut r = vec![Value::Nil; READS];
    if let Some(Value::Array(values)) = sent.next() {
        for (value, i) in values.into_iter().zip([1, 3, 4, 16]) {
            r[i] = value;
        }
    }
    let mut take = |r: &mut Vec<Value>, i: usize| r[i] = sent.next().unwrap_or(Value::Nil);
    let string = matches!(r[1], Value::BulkString(_) | Value::SimpleString(_));
    r[0] = Value::SimpleString(if string { "string" } else { "none" }.to_owned());
    if seen.main {
        take(&mut r, 2);
    }
    take(&mut r, 5);
    let groups: [(bool, &[usize]); 3] = [
        (seen.read_write, &[6, 7, 8, 9, 10]),
        (seen.semaphore, &[11, 12, 13]),
        (seen.main && seen.fair, &[14, 15]),
    ];
    for (read, places) in groups {
        if read {
            for i in places {
                take(&mut r, *i);
            }
        }
    }
    r
}

/// How many replies [`queue_reads`] asks for.
const READS: usize = 17;

/// Reads the locks `(name, key)` on `node` in one pipeline, after one `TIME` (the server's
/// clock, which scores readers' and holders' expiries). `foreign`: keep string keys with a TTL
/// that hold no distlock token.
async fn describe_batch(
    node: &Node,
    sharded: bool,
    locks: &[(String, String, Seen)],
    foreign: bool,
) -> Result<Vec<Vec<LockInfo>>, Failure> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    pipe.cmd("TIME");
    for (_, key, seen) in locks {
        queue_reads(&mut pipe, &LockKeys::of_key(key), sharded, *seen);
    }
    let replies: Vec<Value> = pipe
        .query_async(&mut node.conn.clone())
        .await
        .map_err(|e| Failure::backend(&format!("reading locks on {}", node.addr), &e))?;
    let now_ms = server_ms(replies.first());
    let mut sent = replies.into_iter().skip(1);
    Ok(locks
        .iter()
        .map(|(name, key, seen)| {
            let r = replies_of(*seen, &mut sent);
            read_one(name, key, &r, now_ms, foreign, &node.addr)
        })
        .collect())
}

/// The locks in one lock's replies (see [`queue_reads`]): each kind keeps its own keys, so one
/// name can show as several kinds, and each kind's replies are decoded on their own.
fn read_one(
    name: &str,
    key: &str,
    r: &[Value],
    now_ms: i64,
    foreign: bool,
    node: &str,
) -> Vec<LockInfo> {
    let at = |i: usize| reply(r, i);
    let base = LockInfo {
        name: name.to_owned(),
        key: key.to_owned(),
        kind: "mutex",
        token: None,
        ttl_ms: None,
        fencing_token: text(at(3)).and_then(|t| t.parse().ok()),
        waiters: numsub(at(5)),
        queued: 0,
        readers: None,
        permits: None,
        fair_queue: Vec::new(),
        holder: None,
        node: node.to_owned(),
        ..LockInfo::default()
    };
    let holder = holder_of(|i| raw(at(i)), number_signed(at(2)));
    let with_holder = |mut info: LockInfo| {
        info.holder = holder
            .clone()
            .filter(|_| info.token.as_deref().map(str::as_bytes) == raw(at(1)).as_deref());
        info
    };
    let mut found = Vec::new();
    found.extend(string_lock(r, &base, foreign).map(with_holder));
    found.extend(read_write_lock(r, &base, now_ms).map(with_holder));
    found.extend(semaphore_lock(r, base, now_ms));
    found
}

/// The lock on the name's string key: a mutex, a fair lock when its queue is not empty, or with
/// `foreign` another client's key with a TTL.
fn string_lock(r: &[Value], base: &LockInfo, foreign: bool) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    if text(at(0)).as_deref() != Some("string") {
        return None;
    }
    let value = text(at(1)).unwrap_or_default();
    let ttl = number_signed(at(2));
    let ours = value.starts_with(TOKEN_PREFIX);
    if !(ours || (foreign && ttl > 0)) {
        return None;
    }
    let fair_queue: Vec<String> = strings(at(14));
    let queued = number(at(15));
    Some(LockInfo {
        kind: if !ours {
            "foreign"
        } else if queued > 0 {
            "fair"
        } else {
            "mutex"
        },
        token: Some(value),
        ttl_ms: (ttl >= 0).then_some(ttl),
        queued,
        fair_queue,
        ..base.clone()
    })
}

/// The read-write lock: its writer (with the writer key's TTL) and its readers, when either is
/// there.
fn read_write_lock(r: &[Value], base: &LockInfo, now_ms: i64) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    let writer = text(at(6));
    let readers = number(at(8));
    if writer.is_none() && readers == 0 {
        return None;
    }
    let ttl = number_signed(at(7));
    Some(LockInfo {
        kind: "read-write",
        token: writer.clone(),
        ttl_ms: writer.is_some().then_some(ttl).filter(|t| *t >= 0),
        queued: number(at(10)),
        readers: Some(Members {
            count: readers,
            shown: members(at(9), now_ms, None),
        }),
        ..base.clone()
    })
}

/// The semaphore: its holders and, from its counts hash, `max` and `used`.
fn semaphore_lock(r: &[Value], base: LockInfo, now_ms: i64) -> Option<LockInfo> {
    let at = |i: usize| reply(r, i);
    let holders = number(at(11));
    if holders == 0 {
        return None;
    }
    let counts = pairs(at(13));
    let count = |field: &str| {
        counts
            .iter()
            .find(|(f, _)| f == field)
            .and_then(|(_, v)| v.parse().ok())
    };
    let shown = members(at(12), now_ms, Some(&counts));
    Some(LockInfo {
        kind: "semaphore",
        permits: Some(Permits {
            max: count("max"),
            used: count("used"),
            holders: Members {
                count: holders,
                shown,
            },
        }),
        ttl_ms: None,
        ..base
    })
}

/// The reply at `i` of one lock's replies (see [`queue_reads`]), nil when missing.
fn reply(r: &[Value], i: usize) -> &Value {
    r.get(i).unwrap_or(&Value::Nil)
}

/// Lists every held lock whose name matches `pattern`, master by master: SCAN with COUNT
/// `count`, each key folded to the lock it belongs to, each lock read once.
pub(crate) async fn list(
    target: &Target,
    pattern: &str,
    count: u32,
    foreign: bool,
) -> Result<Listing, Failure> {
    let matcher = glob::Pattern::new(pattern)
        .map_err(|e| Failure::new(USAGE, format!("bad pattern {pattern:?}: {e}")))?;
    let mut listing = Listing::default();
    for node in &target.nodes {
        // The walk first (which keys of each lock exist), then the reads each needs.
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut found: Vec<(String, String, Seen)> = Vec::new();
        let mut cursor: u64 = 0;
        let mut steps = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(count)
                .query_async(&mut node.conn.clone())
                .await
                .map_err(|e| Failure::backend(&format!("SCAN on {}", node.addr), &e))?;
            listing.keys_scanned += keys.len() as u64;
            for key in keys {
                let (lock_key, which) = match LockKeys::owner_of(&key) {
                    Some((owner, which)) => (owner, Some(which)),
                    None => (key, None),
                };
                let Some(name) = lock_key.strip_prefix(target.prefix.as_str()) else {
                    continue;
                };
                if !matcher.matches(name) {
                    continue;
                }
                let at = match index.get(&lock_key) {
                    Some(at) => *at,
                    None => {
                        found.push((name.to_owned(), lock_key.clone(), Seen::default()));
                        index.insert(lock_key, found.len() - 1);
                        found.len() - 1
                    }
                };
                found[at].2.saw(which);
            }
            cursor = next;
            steps += 1;
            if cursor == 0 {
                break;
            }
            if steps >= MAX_SCAN_STEPS {
                listing.truncated = true;
                break;
            }
        }
        drop(index);
        found.retain(|(_, _, seen)| seen.any());
        for chunk in found.chunks(BATCH) {
            for locks in describe_batch(node, target.cluster, chunk, foreign).await? {
                listing.locks.extend(locks);
            }
        }
    }
    listing
        .locks
        .sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    Ok(listing)
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

/// `TIME` as milliseconds.
fn server_ms(reply: Option<&Value>) -> i64 {
    match reply {
        Some(Value::Array(parts)) => {
            let secs = parts
                .first()
                .and_then(text)
                .and_then(|s| s.parse::<i64>().ok());
            let micros = parts
                .get(1)
                .and_then(text)
                .and_then(|s| s.parse::<i64>().ok());
            secs.unwrap_or(0) * 1000 + micros.unwrap_or(0) / 1000
        }
        _ => 0,
    }
}

/// A string reply's bytes, `None` for nil, errors and arrays.
fn raw(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        _ => None,
    }
}

/// A reply as text, `None` for nil, errors and arrays.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) | Value::VerbatimString { text: s, .. } => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// An integer reply, 0 otherwise (a missing set's ZCARD is 0 too).
fn number_signed(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        other => text(other).and_then(|t| t.parse().ok()).unwrap_or(0),
    }
}

/// A count, 0 when absent or negative.
fn number(value: &Value) -> u64 {
    u64::try_from(number_signed(value)).unwrap_or(0)
}

/// The count in a `PUBSUB NUMSUB`/`SHARDNUMSUB` reply: `[channel, n]` (an array in RESP2, a
/// map in RESP3).
fn numsub(value: &Value) -> u64 {
    match value {
        Value::Array(parts) => parts.get(1).map_or(0, number),
        Value::Map(pairs) => pairs.first().map_or(0, |(_, n)| number(n)),
        _ => 0,
    }
}

/// A list reply as strings.
fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().filter_map(text).collect(),
        _ => Vec::new(),
    }
}

/// A flat `[a, b, a, b]` reply (HGETALL in RESP2, `ZRANGE ... WITHSCORES`) or a map, as pairs.
fn pairs(value: &Value) -> Vec<(String, String)> {
    match value {
        Value::Map(pairs) => pairs
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        Value::Array(items) if items.iter().all(|i| matches!(i, Value::Array(_))) => items
            .iter()
            .filter_map(|pair| {
                let [k, v] = strings(pair).try_into().ok()?;
                Some((k, v))
            })
            .collect(),
        other => strings(other)
            .chunks(2)
            .filter_map(|pair| Some((pair.first()?.clone(), pair.get(1)?.clone())))
            .collect(),
    }
}

/// Members of a sorted set scored by expiry (server ms), with their remaining time and, for a
/// semaphore, the permits each holds (`counts`: the counts hash).
fn members(value: &Value, now_ms: i64, counts: Option<&[(String, String)]>) -> Vec<Member> {
    pairs(value)
        .into_iter()
        .map(|(token, score)| {
            // Expiries are whole milliseconds, which Redis prints without a fraction.
            let expiry = score.parse::<i64>().unwrap_or(0);
            let permits = counts.and_then(|c| {
                c.iter()
                    .find(|(f, _)| *f == token)
                    .and_then(|(_, n)| n.parse().ok())
            });
            Member {
                ttl_ms: expiry.saturating_sub(now_ms),
                token,
                permits,
            }
        })
        .collect()
}
