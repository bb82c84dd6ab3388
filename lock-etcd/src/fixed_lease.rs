//! The bucket leases of fixed grants: grants of a fixed TTL (`Lock::try_acquire`, a hand-over)
//! share etcd leases too, one per `EtcdLock`, TTL (in etcd's whole seconds) and *bucket*: a
//! stretch of time of [`bucket`]`(ttl)`, at most [`MAX_BUCKET`]. Such a lease is never kept
//! alive, so it still ends by itself; it is granted for the TTL plus the bucket, so that every
//! grant put on it while it has at least the grant's TTL left keeps its key for that TTL. A
//! grant is then one transaction and a release one more, as for renewed grants
//! (`shared_lease.rs`), with one `LeaseGrant` per bucket instead of a grant and a revoke per
//! lock.
//!
//! The bound. A lease of TTL `s + b` (`s` the grant's TTL rounded up to whole seconds, `b` the
//! bucket) carries a grant whose request started at `t0` only when `t0 + ttl` is at or before
//! the lease's known end (the send time of its `LeaseGrant` plus the TTL etcd granted; etcd
//! counts from a later instant): so the key outlives the holder's validity, which stays
//! `ttl` from `t0` as before. The key was put after etcd made the lease, so etcd deletes it at
//! most `s + b` after the grant's transaction (plus etcd's expiry check, every 500 ms, its
//! minimum TTL, and a leader change's extension, as for any lease): a contender behind a dead
//! holder waits at most one bucket longer than behind a lease of the grant's own.
//!
//! Extending a grant of a bucket lease by hand moves its keys to a lease of their own
//! (`moving.rs`): keeping the bucket lease alive would keep every other key on it too.
//!
//! A bucket lease's id says what it is to every process: [`TAG`] in its top 16 bits, its
//! bucket in seconds in the next 3, random bits below. So a busy answer or a description
//! reports a holder's TTL on it as the lease's time left less the bucket ([`holder_left`]),
//! never more than the grant's TTL.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions};
use lock_core::{LockError, Op, TimeoutPhase, valid_until};
use tokio::time::Instant;

use crate::error::bounded;
use crate::layout::ttl_seconds;
use crate::shared_lease::Shared;

/// The longest bucket: how much longer than its TTL a dead holder's key may stay, at most.
pub(crate) const MAX_BUCKET: Duration = Duration::from_secs(4);

/// The top 16 of the 63 bits of a bucket lease's id.
const TAG: i64 = 0x6b75;
/// Where the tag starts, and where the bucket's 3 bits start.
const TAG_SHIFT: u32 = 47;
const BUCKET_SHIFT: u32 = 44;
/// The random bits of a bucket lease's id.
const RANDOM_BITS: i64 = (1 << BUCKET_SHIFT) - 1;
/// How many ids a bucket lease grant tries when etcd has one already (odds 2^-44 each).
const ID_TRIES: usize = 3;

/// A new bucket lease id for `bucket` (whole seconds, 1 to 4), random below the tag.
fn bucket_lease_id(bucket: Duration) -> Result<i64, LockError> {
    let random = lock_core::Token::generate()?;
    let mut low = [0_u8; 8];
    low.copy_from_slice(&random.as_bytes()[..8]);
    let random = i64::from_le_bytes(low) & RANDOM_BITS;
    let seconds = i64::try_from(bucket.as_secs()).unwrap_or(1) & 0b111;
    Ok((TAG << TAG_SHIFT) | (seconds << BUCKET_SHIFT) | random)
}

/// The bucket of the etcd lease `id` when it is a bucket lease.
fn bucket_of(id: i64) -> Option<Duration> {
    if id >> TAG_SHIFT != TAG {
        return None;
    }
    let seconds = (id >> BUCKET_SHIFT) & 0b111;
    Some(Duration::from_secs(u64::try_from(seconds).ok()?))
}

/// What a holder on the etcd lease `id`, which has `left` (etcd's answer), has left as far as
/// a contender can tell: for a bucket lease, `left` less the bucket while that is more than
/// nothing (the grant's validity ended a bucket before the lease at the latest: never more
/// than the grant's TTL), then `left` itself (the key's last stretch, so a waiter sleeps until
/// it goes rather than spinning); for any other lease, `left`.
pub(crate) fn holder_left(id: i64, left: Duration) -> Duration {
    match bucket_of(id) {
        Some(bucket) if left > bucket => left - bucket,
        _ => left,
    }
}

/// The bucket of grants of `ttl`: an eighth of it, in whole seconds rounded up (etcd's unit),
/// at least 1 s and at most [`MAX_BUCKET`]. Small beside the TTL, so a takeover after a crash
/// waits little longer; a second or more, so a busy lock makes one `LeaseGrant` per bucket.
pub(crate) fn bucket(ttl: Duration) -> Duration {
    Duration::from_secs(u64::try_from(ttl_seconds(ttl / 8)).unwrap_or(1)).min(MAX_BUCKET)
}

/// What this process knows of its bucket leases.
#[derive(Debug, Default)]
struct Known {
    /// The lease new grants of a TTL (whole seconds) go on.
    current: HashMap<i64, Shared>,
    /// Every bucket lease that may still carry a key, by id: what an extend recognizes.
    live: HashMap<i64, Shared>,
}

/// The bucket leases of one `EtcdLock`.
#[derive(Debug, Default)]
pub(crate) struct FixedLeases {
    known: Mutex<Known>,
    /// Taken while a bucket lease is granted, so concurrent grants make one.
    granting: tokio::sync::Mutex<()>,
}

impl FixedLeases {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The current lease of `seconds` if a grant of `ttl` started at `started` fits on it.
    fn fitting(&self, seconds: i64, ttl: Duration, started: Instant) -> Option<Shared> {
        let until = valid_until(started, ttl);
        self.known()
            .current
            .get(&seconds)
            .filter(|lease| until <= lease.expires())
            .copied()
    }

    /// The bucket lease `id`, if it may still carry a key.
    pub(crate) fn by_id(&self, id: i64) -> Option<Shared> {
        self.known().live.get(&id).copied()
    }

    /// Forgets the bucket lease `id` (etcd said it is gone): the next grant makes a new one.
    pub(crate) fn forget(&self, id: i64) {
        let mut known = self.known();
        known.current.retain(|_, lease| lease.id != id);
        known.live.remove(&id);
    }

    /// The bucket lease a grant of `ttl` whose request started at `started` goes on: the
    /// current one of its TTL when the grant's validity ends before it may, else a new one
    /// (TTL plus [`bucket`]).
    ///
    /// # Errors
    /// A `Command` timeout / [`LockError::Backend`] when etcd fails the `LeaseGrant`.
    ///
    /// # Cancel safety
    /// Cancel safe: a lease granted and dropped before it is recorded runs out by itself.
    pub(crate) async fn for_grant(
        &self,
        client: &Client,
        ttl: Duration,
        started: Instant,
        timeout: Duration,
    ) -> Result<Shared, LockError> {
        let seconds = ttl_seconds(ttl);
        if let Some(lease) = self.fitting(seconds, ttl, started) {
            return Ok(lease);
        }
        let _one = self.granting.lock().await;
        if let Some(lease) = self.fitting(seconds, ttl, started) {
            return Ok(lease);
        }
        let bucket = bucket(ttl);
        let asked = seconds.saturating_add(ttl_seconds(bucket));
        let mut leases = client.lease_client();
        let mut tries = 0;
        let (answer, sent) = loop {
            tries += 1;
            let id = bucket_lease_id(bucket)?;
            let sent = Instant::now();
            let options = Some(LeaseGrantOptions::new().with_id(id));
            match bounded(
                Op::Acquire,
                TimeoutPhase::Command,
                timeout,
                leases.grant(asked, options),
            )
            .await
            {
                Err(LockError::Backend { source, .. })
                    if tries < ID_TRIES && source.to_string().contains("lease already exists") => {}
                other => break (other?, sent),
            }
        };
        let lease = Shared {
            id: answer.id(),
            granted: Duration::from_secs(u64::try_from(answer.ttl()).unwrap_or(0).max(1)),
            kept_at: sent,
        };
        let mut known = self.known();
        let now = Instant::now();
        // Bounded: leases past their end carry nothing any more.
        known.live.retain(|_, live| live.expires() > now);
        known.live.insert(lease.id, lease);
        known.current.insert(seconds, lease);
        Ok(lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_an_eighth_of_the_ttl_in_whole_seconds_within_bounds() {
        let secs = Duration::from_secs;
        assert_eq!(bucket(Duration::from_millis(500)), secs(1));
        assert_eq!(bucket(secs(2)), secs(1));
        assert_eq!(bucket(secs(8)), secs(1));
        assert_eq!(bucket(secs(9)), secs(2));
        assert_eq!(bucket(secs(30)), secs(4));
        assert_eq!(bucket(secs(3_600)), MAX_BUCKET);
    }

    #[test]
    fn a_bucket_lease_id_says_its_bucket_and_a_holder_on_it_never_more_than_its_ttl() {
        let secs = Duration::from_secs;
        for b in 1..=4 {
            let id = bucket_lease_id(secs(b)).expect("rng");
            assert!(id > 0, "etcd lease ids are positive");
            assert_eq!(bucket_of(id), Some(secs(b)));
        }
        let id = bucket_lease_id(secs(2)).expect("rng");
        assert_eq!(holder_left(id, secs(9)), secs(7));
        assert_eq!(holder_left(id, secs(2)), secs(2), "the last stretch");
        assert_eq!(holder_left(id, Duration::ZERO), Duration::ZERO);
        assert_eq!(holder_left(12_345, secs(9)), secs(9), "not a bucket lease");
    }
}
