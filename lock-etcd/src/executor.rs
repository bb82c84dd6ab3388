//! [`Executor`]: the state every operation shares (the prefix, the clients, the watch feeds,
//! the timeouts) and the requests the kinds are made of (etcd lease grants, transactions, busy
//! answers). A leaf below `etcd_lock.rs` and the kinds, so neither imports the other.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, LeaseGrantOptions, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use lock_core::backend::Attempt;
use lock_core::{LockError, Op, TimeoutPhase, Token};

use crate::client::{Clients, Target};
use crate::error::{bounded, malformed};
use crate::fixed_lease::{FixedLeases, holder_left};
use crate::layout::{self, EtcdLease, is_ours_layout, ttl_seconds};
use crate::shared_lease::SharedLeases;
use crate::watch::Watches;

/// How long a failed release's etcd lease is revoked again in the background: past a few
/// whole-cluster restarts, each of which restarts its countdown.
const REVOKE_RETRY_FOR: Duration = Duration::from_secs(30);
/// The pause between two of those attempts: doubled from the first to the last.
const REVOKE_RETRY_FIRST: Duration = Duration::from_millis(100);
const REVOKE_RETRY_LAST: Duration = Duration::from_secs(1);

/// The shared state of an [`EtcdLock`](crate::EtcdLock), built by the builder.
#[derive(Debug)]
pub(crate) struct Executor {
    pub(crate) prefix: String,
    pub(crate) target: Arc<Target>,
    pub(crate) clients: Arc<Clients>,
    pub(crate) watches: Watches,
    /// The shared etcd leases of renewed grants (`shared_lease.rs`).
    pub(crate) shared: SharedLeases,
    /// The bucket leases of grants of a fixed TTL and hand-overs (`fixed_lease.rs`).
    pub(crate) fixed: FixedLeases,
}

impl Executor {
    /// The prefix before every lock name.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The etcd key of the lock `name` (the prefix, then the name).
    pub(crate) fn key(&self, name: &str) -> Vec<u8> {
        layout::key(&self.prefix, name)
    }

    /// The etcd client of the current tokio runtime, connected if it was not.
    pub(crate) async fn client(&self) -> Result<Client, LockError> {
        self.clients.get(&self.target).await
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        self.target.command_timeout
    }

    /// Grants `etcd_lease` for `ttl`. An etcd lease left with that id by an attempt of the
    /// same token that was cancelled is revoked and granted again, once.
    pub(crate) async fn grant_etcd_lease(
        &self,
        client: &Client,
        op: Op,
        etcd_lease: EtcdLease,
        ttl: Duration,
    ) -> Result<(), LockError> {
        let (id, seconds) = (etcd_lease.id(), ttl_seconds(ttl));
        let mut leases = client.lease_client();
        let options = || Some(LeaseGrantOptions::new().with_id(id));
        match bounded(
            op,
            TimeoutPhase::Command,
            self.command_timeout(),
            leases.grant(seconds, options()),
        )
        .await
        {
            Err(LockError::Backend { source, .. })
                if source.to_string().contains("lease already exists") =>
            {
                bounded(
                    op,
                    TimeoutPhase::Command,
                    self.command_timeout(),
                    leases.revoke(id),
                )
                .await?;
                bounded(
                    op,
                    TimeoutPhase::Command,
                    self.command_timeout(),
                    leases.grant(seconds, options()),
                )
                .await?;
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// Sends `txn`, bounded by the command timeout.
    pub(crate) async fn txn(
        &self,
        client: &Client,
        op: Op,
        txn: Txn,
    ) -> Result<TxnResponse, LockError> {
        let mut kv = client.kv_client();
        bounded(
            op,
            TimeoutPhase::Command,
            self.command_timeout(),
            kv.txn(txn),
        )
        .await
    }

    /// Revokes `etcd_lease` in the background (an etcd lease with no key left, or a lock
    /// released): it would run out by itself; revoking frees it at once. Errors are ignored.
    pub(crate) fn revoke_etcd_lease_later(&self, client: &Client, etcd_lease: EtcdLease) {
        let mut leases = client.lease_client();
        let timeout = self.command_timeout();
        drop(tokio::spawn(async move {
            let _ = tokio::time::timeout(timeout, leases.revoke(etcd_lease.id())).await;
        }));
    }

    /// Revokes `etcd_lease` in the background, again and again (100 ms apart, doubling to 1 s)
    /// until etcd answers, for at most [`REVOKE_RETRY_FOR`]: the grant of a release that
    /// failed. A lease already gone counts as revoked.
    pub(crate) fn revoke_etcd_lease_until_gone(&self, etcd_lease: EtcdLease) {
        let (clients, target) = (Arc::clone(&self.clients), Arc::clone(&self.target));
        let task = async move {
            let mut pause = REVOKE_RETRY_FIRST;
            loop {
                if let Ok(client) = clients.get(&target).await {
                    let mut leases = client.lease_client();
                    let revoked = tokio::time::timeout(
                        target.command_timeout,
                        leases.revoke(etcd_lease.id()),
                    );
                    match revoked.await {
                        Ok(Ok(_)) => return,
                        Ok(Err(etcd_client::Error::GRpcStatus(status)))
                            if status.code() == tonic::Code::NotFound =>
                        {
                            return;
                        }
                        _ => {}
                    }
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(REVOKE_RETRY_LAST);
            }
        };
        drop(tokio::spawn(async move {
            let _ = tokio::time::timeout(REVOKE_RETRY_FOR, task).await;
        }));
    }

    /// Sends the release transaction `txn` in the background, again and again (as
    /// [`Self::revoke_etcd_lease_until_gone`]) until etcd answers it, for at most
    /// [`REVOKE_RETRY_FOR`]: a failed release of a key on the shared etcd lease, which no revoke
    /// may remove (other grants are on it). Its compare makes a late one harmless.
    pub(crate) fn send_until_answered(&self, txn: Txn) {
        let (clients, target) = (Arc::clone(&self.clients), Arc::clone(&self.target));
        let task = async move {
            let mut pause = REVOKE_RETRY_FIRST;
            loop {
                if let Ok(client) = clients.get(&target).await {
                    let mut kv = client.kv_client();
                    let sent = tokio::time::timeout(target.command_timeout, kv.txn(txn.clone()));
                    if let Ok(Ok(_)) = sent.await {
                        return;
                    }
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(REVOKE_RETRY_LAST);
            }
        };
        drop(tokio::spawn(async move {
            let _ = tokio::time::timeout(REVOKE_RETRY_FOR, task).await;
        }));
    }

    /// The busy answer for the holder `kv` read by a transaction's else branch (see
    /// [`Self::holder_state`]); it announces its release also where every holder is distlock's
    /// (`every_holder_announces`: the read-write lock's and the semaphore's own key spaces).
    pub(crate) async fn busy(
        &self,
        client: &Client,
        holder: Option<&etcd_client::KeyValue>,
        every_holder_announces: bool,
    ) -> Attempt {
        let (holder_ttl, announces) = self.holder_state(client, holder).await;
        Attempt::Busy {
            holder_ttl,
            announces: announces || every_holder_announces,
        }
    }

    /// The holder `kv` read by a transaction's else branch: its etcd lease's remaining TTL (one
    /// more request; on a bucket lease, less the bucket: `fixed_lease::holder_left`) and
    /// whether it announces (its value is distlock's layout).
    pub(crate) async fn holder_state(
        &self,
        client: &Client,
        holder: Option<&etcd_client::KeyValue>,
    ) -> (Option<Duration>, bool) {
        let Some(kv) = holder else {
            // Deleted between the compare and the read cannot happen in one transaction; a
            // missing read is answered as "try again soon".
            return (Some(Duration::ZERO), true);
        };
        let announces = is_ours_layout(kv.value());
        if kv.lease() == 0 {
            return (None, announces);
        }
        let mut leases = client.lease_client();
        let ttl = tokio::time::timeout(
            self.command_timeout(),
            leases.time_to_live(kv.lease(), None),
        )
        .await;
        let holder_ttl = match ttl {
            Ok(Ok(answer)) => Some(holder_left(
                kv.lease(),
                Duration::from_secs(u64::try_from(answer.ttl()).unwrap_or(0)),
            )),
            _ => None,
        };
        (holder_ttl, announces)
    }

    /// Keeps `etcd_lease` alive, or grants it for `ttl` when it does not exist (the first
    /// attempt of a waiter, or its entry lapsed).
    pub(crate) async fn keep_or_grant_etcd_lease(
        &self,
        etcd_lease: EtcdLease,
        ttl: Duration,
    ) -> Result<(), LockError> {
        let client = self.client().await?;
        let mut leases = client.lease_client();
        let kept = bounded(
            Op::Acquire,
            TimeoutPhase::Command,
            self.command_timeout(),
            async {
                match leases.keep_alive(etcd_lease.id()).await {
                    Ok(_) => Ok(true),
                    Err(etcd_client::Error::LeaseKeepAliveError(_)) => Ok(false),
                    Err(err) => Err(err),
                }
            },
        )
        .await?;
        if kept {
            return Ok(());
        }
        self.grant_etcd_lease(&client, Op::Acquire, etcd_lease, ttl)
            .await
    }
}

/// The revision of a transaction's answer: the fencing token of what it wrote.
pub(crate) fn revision(op: Op, answer: &TxnResponse) -> Result<u64, LockError> {
    answer
        .header()
        .and_then(|h| u64::try_from(h.revision()).ok())
        .filter(|r| *r > 0)
        .ok_or_else(|| malformed(op, "a header revision"))
}

/// The key-value pair read by the `index`-th operation of a transaction's branch.
pub(crate) fn read(answer: &TxnResponse, index: usize) -> Option<etcd_client::KeyValue> {
    match answer.op_responses().into_iter().nth(index)? {
        TxnOpResponse::Get(get) => get.kvs().first().cloned(),
        _ => None,
    }
}

/// `Put(key, token's value)` on `etcd_lease`: a holder of the lock key.
pub(crate) fn put_on(key: Vec<u8>, token: &Token, etcd_lease: EtcdLease) -> TxnOp {
    put_on_value(key, layout::value(token), etcd_lease)
}

/// `Put(key, value)` on `etcd_lease`.
pub(crate) fn put_on_value(key: Vec<u8>, value: Vec<u8>, etcd_lease: EtcdLease) -> TxnOp {
    TxnOp::put(
        key,
        value,
        Some(PutOptions::new().with_lease(etcd_lease.id())),
    )
}
