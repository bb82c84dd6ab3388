//! The shared etcd lease of renewed grants (etcd's Go `concurrency.Session` model): one etcd
//! lease per `EtcdLock` and TTL (in etcd's whole seconds), on which every renewed mutex grant
//! puts its key, so a grant is one transaction and a release one more, with no lease grant or
//! revoke around them, and the watchdog keeps one lease alive instead of one per lock.
//!
//! A grant of a fixed TTL goes on a bucket lease instead (`fixed_lease.rs`), never kept alive:
//! it must run out near its TTL, whatever other guards renew.
//!
//! The lease is granted at the first renewed grant of its TTL, with an id etcd picks. What is
//! known of it is a lower bound of its life: `expires` is the send time of the request that
//! granted it or last kept it alive, plus its granted TTL (etcd counts from a later instant).
//! It is kept alive when it was last kept alive more than a tenth of its TTL ago, so a grant
//! or a renewal always gets at least nine tenths of its TTL (the watchdog renews every third,
//! so the stop margin is never reached on a healthy cluster). When etcd says it is gone (it
//! ran out, or was revoked by hand), it is forgotten and the next grant makes a new one; the
//! keys on it are gone with it, which the renewal's read of every key sees.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use etcd_client::Client;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::time::Instant;

use crate::error::bounded;
use crate::layout::ttl_seconds;

/// A shared lease is kept alive again once this fraction of its TTL has passed since the
/// last time (1/10: a grant or renewal gets at least 9/10 of its TTL)...
const FRESH_DIVISOR: u32 = 10;

/// ... or this long, whichever is shorter: what a grant or renewal may lose is bounded in
/// time too. A lease with a lock-delay asks for its lease plus the delay, and its holder is
/// told the answer less the delay: a tenth of a long TTL could be most of the holder's own
/// lease (a 2 s lease with a 10 s delay lost up to 1.2 s). At most 4 keep-alives a second per
/// shared lease, whatever the number of leases on it.
const FRESH_AT_MOST: Duration = Duration::from_millis(250);

/// One shared etcd lease, as this process knows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shared {
    /// The etcd lease id.
    pub(crate) id: i64,
    /// The TTL etcd granted (at least the one asked: etcd raises it to its minimum).
    pub(crate) granted: Duration,
    /// When it was last granted or kept alive (the send time of the request).
    pub(crate) kept_at: Instant,
}

impl Shared {
    /// The latest instant etcd may delete its keys, as far as this process knows.
    pub(crate) fn expires(&self) -> Instant {
        self.kept_at + self.granted
    }

    /// Whether it was kept alive recently enough to give a grant 9/10 of its TTL, and all but
    /// [`FRESH_AT_MOST`] of it.
    fn fresh(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.kept_at)
            < (self.granted / FRESH_DIVISOR).min(FRESH_AT_MOST)
    }
}

/// The shared etcd leases of one `EtcdLock`, by TTL in whole seconds.
#[derive(Debug, Default)]
pub(crate) struct SharedLeases {
    by_ttl: Mutex<HashMap<i64, Shared>>,
    /// Taken while a lease is kept alive or granted, so concurrent grants make one lease.
    refresh: tokio::sync::Mutex<()>,
}

impl SharedLeases {
    fn get(&self, seconds: i64) -> Option<Shared> {
        self.by_ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&seconds)
            .copied()
    }

    fn set(&self, seconds: i64, shared: Shared) {
        self.by_ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(seconds, shared);
    }

    /// Forgets the shared lease `id` (etcd said it is gone): the next grant makes a new one.
    pub(crate) fn forget(&self, id: i64) {
        self.by_ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, shared| shared.id != id);
    }

    /// The shared lease `id`, if this process knows it.
    pub(crate) fn by_id(&self, id: i64) -> Option<Shared> {
        self.by_ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .find(|shared| shared.id == id)
            .copied()
    }

    /// The TTLs (whole seconds) of the shared leases known now.
    pub(crate) fn ttls(&self) -> Vec<i64> {
        self.by_ttl
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .keys()
            .copied()
            .collect()
    }

    /// The shared lease for grants of `ttl`, kept alive first when it was not recently, or
    /// granted when there is none (or etcd says it is gone).
    ///
    /// # Errors
    /// A `Command` timeout / [`LockError::Backend`] when etcd fails the keep-alive or grant.
    ///
    /// # Cancel safety
    /// Cancel safe: a lease granted and dropped before it is recorded runs out by itself.
    pub(crate) async fn fresh(
        &self,
        client: &Client,
        op: Op,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Shared, LockError> {
        let seconds = ttl_seconds(ttl);
        if let Some(shared) = self.get(seconds).filter(|s| s.fresh(Instant::now())) {
            return Ok(shared);
        }
        let _one = self.refresh.lock().await;
        let now = Instant::now();
        let known = self.get(seconds);
        if let Some(shared) = known.filter(|s| s.fresh(now)) {
            return Ok(shared);
        }
        if let Some(shared) = known.filter(|s| s.expires() > now)
            && let Some(kept) = keep_alive(client, op, shared, timeout).await?
        {
            self.set(seconds, kept);
            return Ok(kept);
        }
        self.forget(known.map_or(0, |s| s.id));
        let mut leases = client.lease_client();
        let sent = Instant::now();
        let answer = bounded(
            op,
            TimeoutPhase::Command,
            timeout,
            leases.grant(seconds, None),
        )
        .await?;
        let shared = Shared {
            id: answer.id(),
            granted: Duration::from_secs(u64::try_from(answer.ttl()).unwrap_or(0).max(1)),
            kept_at: sent,
        };
        self.set(seconds, shared);
        Ok(shared)
    }

    /// Keeps the shared lease of `seconds` alive unless it was recently: what a renewal batch
    /// relies on. `Ok(None)` when there is none or etcd says it is gone (it is forgotten).
    ///
    /// # Errors
    /// A `Command` timeout / [`LockError::Backend`] when etcd fails the keep-alive.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub(crate) async fn renew(
        &self,
        client: &Client,
        seconds: i64,
        timeout: Duration,
    ) -> Result<Option<Shared>, LockError> {
        let Some(known) = self.get(seconds) else {
            return Ok(None);
        };
        if known.fresh(Instant::now()) {
            return Ok(Some(known));
        }
        let _one = self.refresh.lock().await;
        let Some(known) = self.get(seconds) else {
            return Ok(None);
        };
        if known.fresh(Instant::now()) {
            return Ok(Some(known));
        }
        let kept = keep_alive(client, Op::Extend, known, timeout).await?;
        match kept {
            Some(kept) => self.set(seconds, kept),
            None => self.forget(known.id),
        }
        Ok(kept)
    }
}

/// One keep-alive of `shared`: the lease as kept now, or `None` when etcd says it is gone.
async fn keep_alive(
    client: &Client,
    op: Op,
    shared: Shared,
    timeout: Duration,
) -> Result<Option<Shared>, LockError> {
    let mut leases = client.lease_client();
    let sent = Instant::now();
    let kept = bounded(op, TimeoutPhase::Command, timeout, async {
        match leases.keep_alive(shared.id).await {
            Ok((_keeper, stream)) => {
                // `keep_alive` has read the first answer; the stream is dropped here.
                drop(stream);
                Ok(true)
            }
            Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
            Err(err) => Err(err),
        }
    })
    .await?;
    Ok(kept.then_some(Shared {
        kept_at: sent,
        ..shared
    }))
}
