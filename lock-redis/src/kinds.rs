//! The read-write lock and the semaphore on Redis: which script each operation runs, on which
//! keys, and what its reply means. The layouts are in the crate README ("Read-write locks and
//! semaphores") and the scripts' headers (`lua/read_acquire.lua` and the rest).

use std::time::Duration;

use std::sync::Arc;

use lock_core::{
    Attempt, Kind, Lease, LockError, MultiAttempt, Op, Token, acquire_in_order, check_ttl,
    fair_entry_ttl, valid_until,
};
use tokio::time::Instant;

use crate::RedisLock;
use crate::conn::Conn;
use crate::error::BACKEND;
use crate::layout::key_slot;
use crate::layout::{
    fair_keys, fence_key, release_channel, reserved, rw_keys, semaphore_keys, token_value,
    turn_prefix,
};
use crate::scripts::{
    EXTEND, FAIR_ACQUIRE, MULTI_ACQUIRE, READ_ACQUIRE, READ_EXTEND, SEMAPHORE_ACQUIRE,
    SEMAPHORE_EXTEND, SEMAPHORE_IN_USE, WRITE_ACQUIRE,
};

/// A script's `1`/`0` flag argument.
fn flag(on: bool) -> &'static str {
    if on { "1" } else { "0" }
}

impl RedisLock {
    /// The key of `name`, refused when it ends like one of distlock's derived keys.
    pub(crate) fn checked_key(&self, name: &str) -> Result<String, LockError> {
        let key = self.key(name);
        if reserved(&key) {
            return Err(LockError::invalid(format!(
                "the lock key {key:?} ends like one of distlock's own keys (fencing counter, channel, readers, permits)"
            )));
        }
        Ok(key)
    }

    /// Every key the lock of `kind` named `name` may write, all in the cluster slot of
    /// [`RedisLock::key`]: for a mutex the key, its fencing counter and its waiting mark (a key
    /// named like the release channel, left by a busy attempt; see the crate README, "Release
    /// announcements"); for a read-write lock
    /// its writer, readers and waiting writers and the fencing counter; for a semaphore its
    /// holders and counts; for a fair lock the mutex's key and counter, its queue's two (by
    /// arrival, by lapse) and the waiting mark. (The release channel is [`RedisLock::release_channel`] for every
    /// kind.) For operators and tests: `distlock`'s own code never needs the list.
    #[must_use]
    pub fn keys_of(&self, name: &str, kind: Kind) -> Vec<String> {
        let key = self.key(name);
        match kind {
            Kind::Read { .. } | Kind::Write { .. } => {
                let mut keys = rw_keys(&key).to_vec();
                keys.push(fence_key(&key));
                keys
            }
            Kind::Semaphore { .. } => semaphore_keys(&key).to_vec(),
            Kind::Fair { .. } => {
                let [queue, entries] = fair_keys(&key);
                let (fence, mark) = (fence_key(&key), release_channel(&key));
                vec![key, fence, queue, entries, mark]
            }
            _ => {
                let (fence, mark) = (fence_key(&key), release_channel(&key));
                vec![key, fence, mark]
            }
        }
    }

    /// One attempt at a read share, the write lock or permits: one EVALSHA.
    pub(crate) async fn try_kind(
        &self,
        name: &str,
        kind: Kind,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let key = self.checked_key(name)?;
        let started = Instant::now();
        let value = token_value(&token);
        let ttl_arg = ttl_ms.to_string();
        let (answer, mut conn): (Vec<i64>, Conn) = match kind {
            Kind::Read { writer_preference } => {
                let [writer, readers, waiting] = rw_keys(&key);
                let fence = fence_key(&key);
                self.run(
                    Op::Acquire,
                    &READ_ACQUIRE,
                    &[&writer, &readers, &waiting, &fence],
                    &[value.as_str(), &ttl_arg, flag(writer_preference)],
                )
                .await?
            }
            Kind::Write { writer_preference } => {
                let [writer, readers, waiting] = rw_keys(&key);
                let fence = fence_key(&key);
                let retention = self.fence_retention_ms.to_string();
                self.run(
                    Op::Acquire,
                    &WRITE_ACQUIRE,
                    &[&writer, &readers, &waiting, &fence],
                    &[
                        value.as_str(),
                        &ttl_arg,
                        flag(writer_preference),
                        &retention,
                    ],
                )
                .await?
            }
            Kind::Semaphore { permits, max } => {
                let [holders, counts] = semaphore_keys(&key);
                self.run(
                    Op::Acquire,
                    &SEMAPHORE_ACQUIRE,
                    &[&holders, &counts],
                    &[
                        value.as_str(),
                        &permits.to_string(),
                        &max.to_string(),
                        &ttl_arg,
                    ],
                )
                .await?
            }
            Kind::Fair { queued } => {
                let [queue, entries] = fair_keys(&key);
                let fence = fence_key(&key);
                let entry_ms = if queued {
                    fair_entry_ttl(Duration::from_millis(ttl_ms))
                        .as_millis()
                        .to_string()
                } else {
                    "0".to_owned()
                };
                let retention = self.fence_retention_ms.to_string();
                self.run(
                    Op::Acquire,
                    &FAIR_ACQUIRE,
                    &[&key, &fence, &queue, &entries],
                    &[value.as_str(), &ttl_arg, &entry_ms, &retention],
                )
                .await?
            }
            other => {
                return Err(LockError::Unsupported {
                    backend: BACKEND,
                    kind: other.label(),
                });
            }
        };
        match answer[..] {
            [1, fence] => {
                let valid = valid_until(started, Duration::from_millis(ttl_ms));
                let fencing_token = u64::try_from(fence).unwrap_or(0);
                let lease = Lease::new(name, token, fencing_token, valid).with_kind(kind);
                self.confirm_grant(&mut conn, &key, &lease).await?;
                Ok(Attempt::Acquired(lease))
            }
            // PTTL -1: a writer key without expiry (not one we wrote): no end known.
            [0, busy_ms, announces] => Ok(Attempt::Busy {
                holder_ttl: u64::try_from(busy_ms).ok().map(Duration::from_millis),
                announces: announces == 1,
            }),
            [-1, held_max] => Err(LockError::PermitsMismatch {
                name: name.to_owned(),
                max: match kind {
                    Kind::Semaphore { max, .. } => max,
                    _ => 0,
                },
                held_max: u32::try_from(held_max).unwrap_or(0),
            }),
            _ => Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: false,
                source: format!("unexpected {kind} acquire reply {answer:?}").into(),
            }),
        }
    }

    /// Extends a reader's share, the write lock or a holder's permits, touching no one else's
    /// expiry.
    pub(crate) async fn extend_kind(
        &self,
        lease: &Lease,
        ttl: Duration,
    ) -> Result<Option<Instant>, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let key = self.key(lease.name());
        let started = Instant::now();
        let (value, ttl_arg) = (token_value(lease.token()), ttl_ms.to_string());
        let args = [value.as_str(), ttl_arg.as_str()];
        let (extended, mut conn): (i64, Conn) = match lease.kind() {
            Kind::Read { .. } => {
                let [_, readers, _] = rw_keys(&key);
                self.run(Op::Extend, &READ_EXTEND, &[&readers], &args)
                    .await?
            }
            Kind::Write { .. } => {
                // The writer key holds the token like a mutex's key: the same compare-and-pexpire.
                let [writer, _, _] = rw_keys(&key);
                self.run(Op::Extend, &EXTEND, &[&writer], &args).await?
            }
            _ => {
                let [holders, counts] = semaphore_keys(&key);
                self.run(Op::Extend, &SEMAPHORE_EXTEND, &[&holders, &counts], &args)
                    .await?
            }
        };
        if extended != 1 {
            return Ok(None);
        }
        self.confirm(&mut conn, &key, Op::Extend).await?;
        Ok(Some(valid_until(started, Duration::from_millis(ttl_ms))))
    }

    /// Releases a reader's share, the write lock (or withdraws a waiting writer's record), or
    /// a holder's permits, announcing it when it may let a waiter in.
    pub(crate) async fn release_kind(&self, lease: &Lease) -> Result<bool, LockError> {
        let key = self.key(lease.name());
        let value = token_value(lease.token());
        let channel = release_channel(&key);
        let (released, _): (i64, Conn) = match lease.kind() {
            kind @ (Kind::Read { .. } | Kind::Write { .. }) => {
                let [writer, readers, waiting] = rw_keys(&key);
                let role = if kind.is_exclusive() { "w" } else { "r" };
                self.run(
                    Op::Release,
                    self.rw_release,
                    &[&writer, &readers, &waiting],
                    &[value.as_str(), role, &channel],
                )
                .await?
            }
            Kind::Fair { .. } => {
                let [queue, entries] = fair_keys(&key);
                self.run(
                    Op::Release,
                    self.fair_release,
                    &[&key, &queue, &entries],
                    &[value.as_str(), &channel, &turn_prefix(&key)],
                )
                .await?
            }
            _ => {
                let [holders, counts] = semaphore_keys(&key);
                self.run(
                    Op::Release,
                    self.semaphore_release,
                    &[&holders, &counts],
                    &[value.as_str(), &channel],
                )
                .await?
            }
        };
        Ok(released == 1)
    }

    /// Several mutexes at once, all or none: one script when every key is on one server (not a
    /// cluster) or in one cluster slot, else one after the other in the given order.
    pub(crate) async fn try_all(
        &self,
        names: &[Arc<str>],
        token: Token,
        ttl: Duration,
    ) -> Result<MultiAttempt, LockError> {
        let ttl_ms = check_ttl(ttl)?;
        let keys = names
            .iter()
            .map(|name| self.checked_key(name))
            .collect::<Result<Vec<_>, _>>()?;
        let one_slot = keys.windows(2).all(|w| key_slot(&w[0]) == key_slot(&w[1]));
        if !(one_slot || self.topology() != "cluster") {
            return acquire_in_order(self, names, token, ttl).await;
        }
        let started = Instant::now();
        let value = token_value(&token);
        let mut all_keys = keys.clone();
        if self.fencing {
            all_keys.extend(keys.iter().map(|key| fence_key(key)));
        }
        let retention = if self.fencing {
            self.fence_retention_ms.to_string()
        } else {
            String::new()
        };
        let (ttl_arg, count) = (ttl_ms.to_string(), keys.len().to_string());
        let key_refs: Vec<&str> = all_keys.iter().map(String::as_str).collect();
        let (answer, mut conn): (Vec<i64>, Conn) = self
            .run(
                Op::Acquire,
                &MULTI_ACQUIRE,
                &key_refs,
                &[value.as_str(), &ttl_arg, &retention, &count],
            )
            .await?;
        match answer[..] {
            [1, ref fences @ ..] if fences.len() == names.len() => {
                let valid = valid_until(started, Duration::from_millis(ttl_ms));
                let leases: Vec<Lease> = names
                    .iter()
                    .zip(fences)
                    .map(|(name, fence)| {
                        Lease::new(
                            Arc::clone(name),
                            token,
                            u64::try_from(*fence).unwrap_or(0),
                            valid,
                        )
                    })
                    .collect();
                // Replicas confirm the writes of the one script (one WAIT for all of them); a
                // grant they do not confirm is given back.
                if let Err(error) = self.confirm(&mut conn, &keys[0], Op::Acquire).await {
                    for lease in &leases {
                        if let Err(release_error) = lock_core::Lock::release(self, lease).await {
                            tracing::warn!(%release_error, "releasing an unconfirmed grant failed; it expires at the end of its TTL");
                        }
                    }
                    return Err(error);
                }
                Ok(MultiAttempt::Acquired(leases))
            }
            [0, index, busy_ms, announces] => {
                let index = usize::try_from(index).unwrap_or(0);
                let holder_ttl = u64::try_from(busy_ms).ok().map(Duration::from_millis);
                if announces == 1
                    && let (Some(key), Some(holder_ttl)) = (keys.get(index), holder_ttl)
                {
                    self.mark_waiting(key, holder_ttl).await;
                }
                Ok(MultiAttempt::Busy {
                    index,
                    holder_ttl,
                    announces: announces == 1,
                })
            }
            _ => Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: false,
                source: format!("unexpected multi acquire reply {answer:?}").into(),
            }),
        }
    }

    /// The permits of the semaphore `name` in use, after pruning expired holders.
    pub(crate) async fn permits_used(&self, name: &str) -> Result<u32, LockError> {
        let key = self.checked_key(name)?;
        let [holders, counts] = semaphore_keys(&key);
        let (used, _): (i64, Conn) = self
            .run(Op::Acquire, &SEMAPHORE_IN_USE, &[&holders, &counts], &[])
            .await?;
        Ok(u32::try_from(used).unwrap_or(0))
    }
}
