//! What the clones of one `ObjectStoreLock` share: the store, the observations, the held
//! leases and the self-probe's answer. Apart from `object_store_lock.rs` so that the grant and the
//! rewrites (which the lock calls) take it without importing the lock.

use std::time::Duration;

use lock_core::LockError;
use tokio::sync::OnceCell;

use crate::error::BACKEND;
use crate::held::Held;
use crate::observe::Observations;
use crate::probe::{Ignored, probe};
use crate::store::Objects;

/// The constant part of the clock-rate allowance: 2 ms, as Redlock's.
const DRIFT_CONSTANT: Duration = Duration::from_millis(2);
/// The proportional part: 1 % of the lease, as Redlock's.
const DRIFT_PER_MILLE: u32 = 10;

/// What the clones of one lock share.
pub(crate) struct Shared {
    pub(crate) objects: Objects,
    pub(crate) observations: Observations,
    pub(crate) held: Held,
    /// The self-probe's answer, once it gave one (a store error leaves it unset: tried again).
    pub(crate) probed: OnceCell<Result<(), &'static str>>,
}

impl Shared {
    /// The self-probe's answer, running it on first use.
    pub(crate) async fn probe(&self) -> Result<(), LockError> {
        let answer = self
            .probed
            .get_or_try_init(|| async {
                Ok::<_, LockError>(match probe(&self.objects).await? {
                    None => Ok(()),
                    Some(ignored) => Err(self.refusal(ignored)),
                })
            })
            .await?;
        answer.map_err(|backend| LockError::Unsupported {
            backend,
            kind: "conditional-write",
        })
    }

    /// The label of a refused store: the error names it. Leaked once per lock (the answer is
    /// kept), because [`LockError::Unsupported`] holds a `&'static str`.
    fn refusal(&self, ignored: Ignored) -> &'static str {
        let what = match ignored {
            Ignored::Create => "accepted a create over an existing object (If-None-Match ignored)",
            Ignored::Update => "accepted an update on a stale version (If-Match ignored)",
            Ignored::NotImplemented => "cannot write conditionally",
        };
        tracing::error!(backend = BACKEND, store = %self.objects.label, what, "store refused");
        Box::leak(format!("object-store on {} (it {what})", self.objects.label).into_boxed_str())
    }

    /// The allowance for the two machines' clock rates over `lease`: 1 % + 2 ms.
    pub(crate) fn drift(&self, lease: Duration) -> Duration {
        lease * DRIFT_PER_MILLE / 1000 + DRIFT_CONSTANT
    }
}
