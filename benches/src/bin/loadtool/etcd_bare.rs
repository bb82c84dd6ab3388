//! E1's bare client: the etcd transactions distlock sends, through the same client
//! (etcd-client), and nothing else. A leaf of its own, so that the cycle loop (`cycles.rs`) can
//! drive it and E1 (`etcd.rs`) can build it without the two importing each other.

use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};

/// E1's bare client: etcd-client, sending the transactions distlock sends, nothing else.
#[derive(Clone)]
pub(crate) struct BareEtcd {
    client: Client,
    /// The lease every put goes on; `None`: a lease of its own per cycle.
    lease: Option<i64>,
    /// The TTL of a lease of the cycle's own, whole seconds.
    ttl_s: i64,
}

impl BareEtcd {
    /// Connects to `endpoint`; with `shared_lease`, grants the one lease every cycle uses
    /// (an hour long: it outlives the run), else each cycle grants one of `ttl`.
    pub(crate) async fn connect(
        endpoint: &str,
        shared_lease: bool,
        ttl: Duration,
    ) -> Result<Self, String> {
        let mut client = Client::connect([endpoint], None)
            .await
            .map_err(|e| format!("connecting to etcd at {endpoint}: {e}"))?;
        let lease = if shared_lease {
            Some(
                client
                    .lease_grant(3_600, None)
                    .await
                    .map_err(|e| e.to_string())?
                    .id(),
            )
        } else {
            None
        };
        let ttl_s = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        Ok(Self {
            client,
            lease,
            ttl_s,
        })
    }

    /// One acquire + release of the free lock `name`: a put-if-absent transaction (else read
    /// the holder), then a compare-and-delete transaction.
    pub(crate) async fn cycle(&self, name: &str) -> Result<(), String> {
        let key = format!("bare/{name}");
        let value = format!("dl:{:032x}", fastrand::u128(..));
        let (lease, own) = match self.lease {
            Some(id) => (id, false),
            None => {
                let id = self
                    .client
                    .lease_client()
                    .grant(self.ttl_s, None)
                    .await
                    .map_err(|e| e.to_string())?
                    .id();
                (id, true)
            }
        };
        let mut kv = self.client.kv_client();
        let put = Txn::new()
            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key.as_str(),
                value.as_str(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(key.as_str(), None)]);
        if !kv.txn(put).await.map_err(|e| e.to_string())?.succeeded() {
            return Err("the lock was busy".into());
        }
        let delete = Txn::new()
            .when([Compare::value(
                key.as_str(),
                CompareOp::Equal,
                value.as_str(),
            )])
            .and_then([TxnOp::delete(key.as_str(), None)]);
        if !kv.txn(delete).await.map_err(|e| e.to_string())?.succeeded() {
            return Err("the lock was no longer ours".into());
        }
        if own {
            // In the background, as EtcdLock revokes its lease after a release.
            let mut leases = self.client.lease_client();
            tokio::spawn(async move {
                let _ = leases.revoke(lease).await;
            });
        }
        Ok(())
    }
}
