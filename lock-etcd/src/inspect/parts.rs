//! One lock name's keys, as a read found them, turned into its holds ([`HeldLock`]s).
//!
//! How each kind shows in the layout (`layout.rs`):
//! - the lock key `prefix + name` holds `dl:<token>` for a mutex, a fair lock and a writer
//!   alike. A write grant puts the fence key in the same transaction, so the lock key is a
//!   writer's when the fence key's `mod_revision` is the lock key's; a fair lock is one with
//!   queue entries; any other holder is a mutex;
//! - readers and semaphore holders are keys of their own, on etcd leases of their own;
//! - the holder's note is tied to the grant by the lock key's value written in front of it;
//! - each grant's time is a key of its own, named by the grant's token.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use etcd_client::{Client, KeyValue};
use futures::{StreamExt, stream};
use lock_core::backend::{HeldKind, HeldLock, HolderView, MAX_HOLDERS_SHOWN};
use lock_core::{LockError, Op, TimeoutPhase};

use crate::error::bounded;
use crate::executor::Executor;
use crate::layout::{Parsed, Space, granted_at, holder_parts, is_ours_layout, term, token_hex};

/// Lease TTL requests in flight at once (etcd has no request that reads several).
pub(super) const TTL_READS_IN_FLIGHT: usize = 16;

/// Everything read of one lock name: its lock key and the keys beside it.
#[derive(Debug, Default)]
pub(super) struct Parts {
    lock: Option<KeyValue>,
    note: Option<KeyValue>,
    fence: Option<KeyValue>,
    semaphore: Vec<KeyValue>,
    fair: Vec<KeyValue>,
    readers: Vec<KeyValue>,
    waiting: Vec<KeyValue>,
    /// Grant times, by the grant's token (hex).
    granted: HashMap<Vec<u8>, SystemTime>,
    /// The grant-time keys as read: whose `create_revision` is a moved grant's term.
    stamps: Vec<KeyValue>,
}

/// What a hold is built from besides its keys: where to read lease TTLs, and how.
pub(super) struct Context<'a> {
    pub(super) exec: &'a Executor,
    pub(super) client: &'a Client,
    /// The `node` of every hold (the members).
    pub(super) node: &'a str,
    /// Show a lock key with a lease whose value is not distlock's ([`HeldKind::Foreign`]).
    pub(super) foreign: bool,
    /// Read each listed reader's and semaphore holder's lease TTL too (else `None`).
    pub(super) member_ttls: bool,
}

impl Parts {
    /// Files `kv`, which `parsed` says what it is, here.
    pub(super) fn add(&mut self, parsed: &Parsed<'_>, kv: KeyValue) {
        let Parsed::Derived { space, rest, .. } = parsed else {
            self.lock = Some(kv);
            return;
        };
        match space {
            Space::Granted => {
                if let Some(at) = granted_at(kv.value()) {
                    self.granted.insert(rest.to_vec(), at);
                }
                self.stamps.push(kv);
            }
            Space::Note => self.note = Some(kv),
            Space::Fence => self.fence = Some(kv),
            Space::Semaphore => self.semaphore.push(kv),
            Space::Fair => self.fair.push(kv),
            Space::Reader => self.readers.push(kv),
            Space::Waiting => self.waiting.push(kv),
        }
    }

    /// The holds of `name` these keys make: the holder of its lock key, its readers, its
    /// semaphore's holders (each only when there is one).
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when a lease TTL read fails.
    pub(super) async fn build(
        mut self,
        cx: &Context<'_>,
        name: &str,
    ) -> Result<Vec<HeldLock>, LockError> {
        for kvs in [
            &mut self.semaphore,
            &mut self.fair,
            &mut self.readers,
            &mut self.waiting,
        ] {
            kvs.sort_by_key(KeyValue::create_revision);
        }
        let key = String::from_utf8_lossy(&cx.exec.key(name)).into_owned();
        let base = |kind| HeldLock::new(name, key.as_str(), kind, cx.node);
        // A write grant puts the lock key and the fence key in one transaction.
        let writer = self.lock.as_ref().is_some_and(|lock| {
            self.fence
                .as_ref()
                .is_some_and(|f| f.mod_revision() == lock.mod_revision())
        });
        let mut found = Vec::new();
        if let Some(held) = self.key_lock(cx, name, writer, base).await? {
            found.push(held);
        }
        if !writer && !self.readers.is_empty() {
            found.push(self.readers_lock(cx, base(HeldKind::Read)).await?);
        }
        if let Some(held) = self.semaphore_lock(cx, base(HeldKind::Semaphore)).await? {
            found.push(held);
        }
        Ok(found)
    }

    /// The hold of the lock key: a mutex, a fair lock (with queue entries), a writer, or with
    /// `foreign` another client's key with a lease. Its last fencing token is the revision of
    /// the grant that wrote it (`layout::term`: the key's `mod_revision`, unless an extend
    /// moved the grant to a lease of its own); a foreign key's, its `mod_revision`.
    async fn key_lock(
        &self,
        cx: &Context<'_>,
        name: &str,
        writer: bool,
        base: impl Fn(HeldKind) -> HeldLock,
    ) -> Result<Option<HeldLock>, LockError> {
        let Some(lock) = &self.lock else {
            return Ok(None);
        };
        let ours = is_ours_layout(lock.value());
        if !(ours || (cx.foreign && lock.lease() != 0)) {
            return Ok(None);
        }
        let kind = if !ours {
            HeldKind::Foreign
        } else if writer {
            HeldKind::Write
        } else if !self.fair.is_empty() {
            HeldKind::Fair
        } else {
            HeldKind::Mutex
        };
        let revision = if ours {
            Some(term(cx.exec.prefix(), name, lock, &self.stamps))
        } else {
            u64::try_from(lock.mod_revision()).ok()
        };
        let mut holder = self.holder(lock.value(), lease_ttl(cx, lock.lease()).await?);
        if ours {
            holder.fencing_token = revision;
            let note = self.note.as_ref().and_then(|n| {
                n.value()
                    .strip_prefix(lock.value())
                    .and_then(|rest| rest.strip_prefix(b"\n"))
            });
            if let Some(note) = note {
                holder = holder.note(note.to_vec());
            }
        }
        let mut held = base(kind).holder(holder);
        held.last_fencing_token = revision;
        if kind == HeldKind::Fair {
            held.queued = self.fair.len() as u64;
            held.queue = (self.fair.iter())
                .take(MAX_HOLDERS_SHOWN)
                .map(|kv| lossy(kv.value()))
                .collect();
        }
        if writer {
            held.queued = self.waiting.len() as u64;
        }
        Ok(Some(held))
    }

    /// The read-write lock held by its readers (no writer): they hold the last write's fence.
    async fn readers_lock(
        &self,
        cx: &Context<'_>,
        mut held: HeldLock,
    ) -> Result<HeldLock, LockError> {
        let fence = (self.fence.as_ref()).and_then(|f| u64::try_from(f.mod_revision()).ok());
        held.last_fencing_token = fence;
        held.queued = self.waiting.len() as u64;
        for (kv, ttl) in self
            .readers
            .iter()
            .zip(member_ttls(cx, &self.readers).await?)
        {
            let mut holder = self.holder(kv.value(), ttl);
            holder.fencing_token = fence;
            held = held.holder(holder);
        }
        Ok(held)
    }

    /// The semaphore, when it has holders: `max` as the first holder wrote it, the permits in
    /// use the sum of the holders'.
    async fn semaphore_lock(
        &self,
        cx: &Context<'_>,
        mut held: HeldLock,
    ) -> Result<Option<HeldLock>, LockError> {
        // Each holder's key, its value's token part, its permits and the `max` it wrote.
        let holders: Vec<(KeyValue, Vec<u8>, u64, u64)> = (self.semaphore.iter())
            .filter_map(|kv| {
                let (value, permits, max) = holder_parts(kv.value())?;
                Some((kv.clone(), value.to_vec(), permits, max))
            })
            .collect();
        let Some((_, _, _, max)) = holders.first() else {
            return Ok(None);
        };
        held.max_permits = Some(*max);
        held.permits_used = Some(holders.iter().map(|(_, _, p, _)| p).sum());
        let kvs: Vec<KeyValue> = holders.iter().map(|(kv, ..)| kv.clone()).collect();
        let ttls = member_ttls(cx, &kvs).await?;
        for ((_, value, permits, _), ttl) in holders.iter().zip(ttls) {
            held = held.holder(self.holder(value, ttl).permits(*permits));
        }
        Ok(Some(held))
    }

    /// The holder whose value is `value`: its token as stored (what `release_token` takes),
    /// its TTL left, and its grant time where the grant wrote one.
    fn holder(&self, value: &[u8], ttl: Option<Duration>) -> HolderView {
        let mut holder = HolderView::new(lossy(value));
        holder.ttl = ttl;
        holder.since = token_hex(value).and_then(|hex| self.granted.get(hex.as_bytes()).copied());
        holder
    }
}

/// The TTL of each of `kvs`'s etcd leases, one per key: read side by side for the first
/// [`MAX_HOLDERS_SHOWN`] (the holders listed) when the context asks for them, else `None`.
async fn member_ttls(
    cx: &Context<'_>,
    kvs: &[KeyValue],
) -> Result<Vec<Option<Duration>>, LockError> {
    let shown = if cx.member_ttls {
        kvs.len().min(MAX_HOLDERS_SHOWN)
    } else {
        0
    };
    let reads: Vec<_> = (kvs[..shown].iter())
        .map(|kv| lease_ttl(cx, kv.lease()))
        .collect();
    let mut ttls = stream::iter(reads)
        .buffered(TTL_READS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    ttls.resize(kvs.len(), None);
    Ok(ttls)
}

/// What the etcd lease `id` has left (etcd counts whole seconds; on a bucket lease, less the
/// bucket: `fixed_lease::holder_left`): `None` for no lease (0) or one that ran out since the
/// key was read.
async fn lease_ttl(cx: &Context<'_>, id: i64) -> Result<Option<Duration>, LockError> {
    if id == 0 {
        return Ok(None);
    }
    let mut leases = cx.client.lease_client();
    let answer = bounded(
        Op::Read,
        TimeoutPhase::Command,
        cx.exec.command_timeout(),
        leases.time_to_live(id, None),
    )
    .await?;
    Ok(u64::try_from(answer.ttl())
        .ok()
        .map(|left| crate::fixed_lease::holder_left(id, Duration::from_secs(left))))
}

/// Bytes as text, invalid UTF-8 replaced.
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
