//! `Redlock`: the [`Lock`] over N independent nodes. The type, its operator methods, and the
//! `impl Lock` that sends the mutex's operations to their functions (`kinds/`); construction
//! lives with its configuration (`config.rs`, which also holds `Redlock::builder`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Attempt, Holder, Lock, ReleaseWatch};
use lock_core::{Lease, LockError, Op, Token, check_name, check_ttl};
use tokio::time::Instant;

use crate::error::BACKEND;
use crate::kinds::mutex::{self, Plan};
use crate::kinds::note;
use crate::node::Node;
use crate::round::{Fanout, Until};
use crate::settings::{Config, default_node_timeout};
use crate::shared::Shared;
use crate::tally::{Decision, drift, quorum};
use crate::telemetry;

/// A lock over N independent lock stores — normally N [`RedisLock`]s, one per Redis master —
/// granted when a quorum (`N/2 + 1`) of them grants it: the Redlock algorithm of the Redis
/// distributed-locks page (<https://redis.io/docs/latest/develop/use/patterns/distributed-locks/>).
///
/// It is a [`Lock`], so a [`Locker`](lock_core::Locker) drives it like any backend: bounded
/// waiting with full-jitter backoff, cleanup of cancelled attempts, guards. Cheap to clone
/// (one `Arc`).
///
/// - **Acquire** sends the same name and token to all N nodes at once, each attempt bounded by
///   the per-node timeout, and answers as soon as the outcome is decided: granted when a
///   quorum granted and the validity `ttl − elapsed − drift` is positive; busy when the
///   refusals alone rule out a quorum; else a [`QuorumNotReached`] error. Nodes that answer
///   after the decision are seen through in the background (released if the acquire failed).
/// - **Extend** needs a quorum of all N to extend, within the new validity; it then repairs
///   the nodes that had lost the key (a `SET NX` of the same token through the node's
///   acquire), so a node restarted empty holds the lease again.
/// - **Release** goes to all N and reports `true` iff a quorum released a key holding our token.
///   It returns once every node that is not lagging has answered (or its timeout passed), so
///   the next acquire of the name never finds our previous key on a healthy node; a hung or
///   down node costs one release its timeout, not every release.
/// - **Fencing token**: the largest token among the nodes that granted; see the crate docs for
///   exactly what it guarantees.
/// - **Wake-ups**: [`Lock::watch`] merges the nodes' release announcements, so waiters in other
///   processes wake on a release.
/// - **Observers**: [`Lock::annotate`] writes the holder's note on every node, naming the
///   grant; [`Lock::describe_holder`] reads every node and reports the grant a quorum of them
///   names, with the Redlock lease's fencing token as its term — so leader election's
///   `Election::leader` and `Election::observe` work on a Redlock (the crate README,
///   "Observers").
///
/// Every round runs in the caller's task, with one deadline for all its nodes; what is still
/// out when an answer is returned early, or when the caller gives up, is handed to a task of
/// its own (spawned on the current tokio runtime), so it never strands a key on a slow node.
///
/// [`RedisLock`]: https://docs.rs/lock-redis
/// [`QuorumNotReached`]: crate::QuorumNotReached
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
}

impl Redlock {
    pub(crate) fn assemble(nodes: Vec<Node>, config: Config) -> Self {
        Self {
            shared: Arc::new(Shared::new(nodes, config)),
        }
    }

    /// The number of nodes, N.
    #[must_use]
    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// The quorum: `N/2 + 1` of all N nodes.
    #[must_use]
    pub fn quorum(&self) -> usize {
        quorum(self.node_count())
    }

    /// The nodes with their labels, in the order they were added.
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = (&str, &Arc<dyn Lock>)> {
        self.shared.nodes.iter().map(|n| (&*n.label, &n.lock))
    }

    /// The clock-drift allowance for `ttl`: `ttl × drift factor + drift constant` (by default
    /// 1 % + 2 ms), saturating.
    #[must_use]
    pub fn drift(&self, ttl: Duration) -> Duration {
        let c = &self.shared.config;
        drift(ttl, c.drift_factor, c.drift_constant)
    }

    /// The bound of each node's attempt when acquiring or extending with `ttl`: the configured
    /// node timeout or [`default_node_timeout`]`(ttl)`, and never more than `ttl − drift` (an
    /// answer after that could not make the lease valid).
    #[must_use]
    pub fn node_timeout(&self, ttl: Duration) -> Duration {
        let configured = self
            .shared
            .config
            .node_timeout
            .unwrap_or_else(|| default_node_timeout(ttl));
        configured.min(ttl.saturating_sub(self.drift(ttl)))
    }

    /// The TTL in whole milliseconds, as the nodes apply it, its drift allowance and the node
    /// timeout; an error when no lease of that TTL could ever be valid.
    fn plan(&self, ttl: Duration) -> Result<Plan, LockError> {
        let ttl = Duration::from_millis(check_ttl(ttl)?);
        let drift = self.drift(ttl);
        if ttl <= drift {
            return Err(LockError::invalid(format!(
                "a TTL of {ttl:?} leaves no validity after the clock-drift allowance of {drift:?}: \
                 a Redlock lease needs a longer TTL"
            )));
        }
        Ok(Plan {
            ttl,
            drift,
            node_timeout: self.node_timeout(ttl),
        })
    }

    /// Refuses the observers' calls, before any I/O, when a node cannot describe holders.
    fn check_holders(&self) -> Result<(), LockError> {
        if self.capabilities().holders {
            Ok(())
        } else {
            Err(LockError::Unsupported {
                backend: BACKEND,
                kind: "holder",
            })
        }
    }
}

/// The bound on one node's answer to [`Redlock::ping`](Lock::ping), beyond the node's own
/// connect and command timeouts: a start-up check may have to connect first.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);

#[async_trait]
impl Lock for Redlock {
    /// `"redlock"`.
    fn backend(&self) -> &'static str {
        BACKEND
    }

    /// Derived from the nodes' tables. The mutex only: a quorum of read shares, permits or
    /// queues has no algorithm here, so the other kinds are refused before anything is sent.
    /// The multi-lock one name after the other. Fencing keeps less than one store: the token
    /// is the largest the granting nodes issued (the crate README, "Fencing tokens"). Over
    /// nodes whose tokens share the wall clock's scale (`RedisLock`, `PostgresLock`) a grant's
    /// token is larger than an earlier one's once the earlier holder held longer than the
    /// nodes' clocks differ ([`Fencing::AfterHolding`]); over nodes that issue none, none;
    /// over plain counters (`MemoryLock`) or a mix, one node's counter may run ahead, so the
    /// tokens are [`Fencing::Unordered`]. Releases announced when `N − quorum + 1` nodes
    /// announce them ([`Lock::watch`] answers `Some` once that many subscribed: every quorum
    /// release reaches one of them). Holder descriptions when every node offers them
    /// ([`Lock::describe_holder`], [`Lock::annotate`]): a node that cannot would fail every
    /// read and write of them.
    ///
    /// [`Fencing::AfterHolding`]: lock_core::backend::Fencing::AfterHolding
    /// [`Fencing::Unordered`]: lock_core::backend::Fencing::Unordered
    fn inspector(&self) -> Option<&dyn lock_core::backend::Inspect> {
        Some(self)
    }

    fn capabilities(&self) -> lock_core::backend::Capabilities {
        capabilities_over(
            self.nodes().map(|(_, lock)| lock.capabilities()),
            self.quorum(),
        )
    }

    /// Tries once to acquire `name` on all N nodes at once, with `token` on every one.
    ///
    /// Granted iff a quorum granted and `ttl − elapsed − drift > 0`; the lease's `valid_until`
    /// is `start + ttl − drift` (start: before any request was sent) and its fencing token the
    /// largest among the grants. Answers as soon as the outcome is decided; the nodes still
    /// pending are seen through in the background.
    ///
    /// On a node where a release of `name` by this `Redlock` (a [`release`](Lock::release) or
    /// the cleanup of a failed acquire) has not finished yet, the attempt is sent once it has,
    /// so that it cannot find our previous key there. The wait counts against that node's
    /// timeout: if the release is still unfinished then, the attempt is not sent and counts as
    /// a timeout on that node (a hung node; the other nodes decide meanwhile).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when `ttl` is out of range or not longer than its drift
    /// allowance (nothing sent; with the defaults the shortest TTL is 3 ms), or when the nodes
    /// themselves refuse the name. A [`LockError::QuorumNotReached`] whose source is a
    /// [`QuorumNotReached`] when failing nodes prevented a quorum (non-retryable when the
    /// nodes' non-retryable errors alone did), or a [`ValidityExpired`] when the quorum
    /// answered too late. `Ok(Attempt::Busy)` (not an error) when the refusals alone rule out a
    /// quorum, with the time until enough of the holders' keys expire.
    ///
    /// On every failure the nodes that granted, or may have, are released in the background,
    /// each once its own attempt has finished (so a late grant is released too); the next
    /// acquire of `name` waits for these releases as for any other.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: dropped, the round goes on in a task of its own and releases
    /// whatever it acquired once the attempts finish. (The `Locker` also releases the token, as
    /// for any backend.)
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    /// [`ValidityExpired`]: crate::ValidityExpired
    async fn try_acquire(
        &self,
        name: &str,
        token: Token,
        ttl: Duration,
    ) -> Result<Attempt, LockError> {
        let plan = self.plan(ttl).inspect_err(|_| {
            telemetry::quorum_outcome(Op::Acquire, "invalid");
        })?;
        mutex::try_acquire(&self.shared, name, token, plan).await
    }

    /// Extends `lease` on all N nodes to `ttl` from now; `Some(start + ttl − drift)` iff a
    /// quorum extended it within that validity.
    ///
    /// A node extends only a key that still holds the lease's token: a node that missed the
    /// acquire (it was down) or lost the key (restarted empty) does not count towards the
    /// quorum, so after losing nodes an extend can fail while the lease is still valid — take
    /// a new lock then.
    ///
    /// It waits for every node that is not lagging (its last call answered), up to the node
    /// timeout, not only for the quorum: it then **repairs** the nodes that answered "not
    /// ours". After a quorum extended the lease within its validity, each such node is sent
    /// the lease's own token with the node's ordinary acquire (`SET NX PX` on a `RedisLock`)
    /// for the rest of the new TTL, and the extend returns once those answered (each bounded
    /// by the node timeout). The acquire sets the key only where it is absent, so a node where
    /// another token holds the key refuses and is left alone, and a node that grants nothing
    /// for now (a `RedisLock` in its grace period) refuses as it refuses every grant. The
    /// lease's footprint is rebuilt instead of eroding node by node (go-redsync/redsync#186).
    /// Counted under `op="repair"` in the node metrics; a release of the lease waits for a
    /// repair still in flight on each node.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a TTL out of range or not longer than its drift
    /// allowance. A [`LockError::QuorumNotReached`] (source: [`QuorumNotReached`]) when
    /// failing nodes prevented a quorum, or [`ValidityExpired`] when the quorum answered too
    /// late; the lease is then unchanged or extended on some nodes. `Ok(None)` (the lease is
    /// no longer ours) when the refusals alone rule out a quorum.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the lease is unchanged or extended (the nodes' calls still out,
    /// repairs included, are seen through in the background).
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    /// [`ValidityExpired`]: crate::ValidityExpired
    async fn extend(&self, lease: &Lease, ttl: Duration) -> Result<Option<Instant>, LockError> {
        let plan = self.plan(ttl)?;
        mutex::extend(&self.shared, lease, plan).await
    }

    /// Releases `lease` on all N nodes (compare-and-delete with its token on each, whether or
    /// not the node granted it). Returns `true` iff a quorum released a key holding the
    /// token, `false` iff the refusals alone rule that out (the lease had expired on too many
    /// nodes — it was no longer safely ours).
    ///
    /// **Waits for every node that is not lagging**: it returns once the outcome is decided
    /// and every node whose last call (in any round: acquire, extend, release, ping) answered
    /// has answered this one too, or once the release timeout (the configured node timeout,
    /// else [`NODE_TIMEOUT_CEILING`](crate::NODE_TIMEOUT_CEILING), 500 ms) has passed since
    /// the call — never later; a node that has not answered by then counts as timed out. So
    /// when it returns, no healthy node still holds the lease, and the next acquire of the name
    /// is granted by every healthy node. A node whose last call timed out or failed is *lagging*: its release is still
    /// sent, but not waited for (it is seen through in the background, as below). So a node
    /// that hangs or goes down costs the first release after that its timeout (or the time to
    /// its error), and the releases after it nothing; once one of its calls answers again, it
    /// is waited for again.
    ///
    /// On a node whose acquire attempt for this lease is still in flight (the lease was
    /// granted without it), the release waits for that attempt to finish, so it lands after
    /// it: each node gets exactly one release. A node's release still out at the timeout (or
    /// when the future is dropped) is seen through in the background, for at most one more
    /// timeout, and registered under the lease's name until then: the next
    /// [`try_acquire`](Lock::try_acquire) of the name by this `Redlock` — by any task, through
    /// any `Locker` over it — sends its attempt to that node only once the release has
    /// finished there. Processes with their own `Redlock` are not ordered after it.
    ///
    /// # Errors
    /// A [`LockError::QuorumNotReached`] (source: [`QuorumNotReached`]) when failing
    /// nodes left it undecided; the keys on those nodes expire at the end of their TTL.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the round still releases on every node in the background, and an
    /// acquire of the name made after the drop waits for it on each node.
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    async fn release(&self, lease: &Lease) -> Result<bool, LockError> {
        mutex::release(&self.shared, lease).await
    }

    /// Pings every node at once (each bounded by [`PING_TIMEOUT`] on top of its own timeouts)
    /// and answers `Ok(())` once a quorum answered: the lock can then grant. For start-up
    /// checks (`Locker::ping`).
    ///
    /// # Errors
    /// [`QuorumNotReached`] (as a [`LockError`]) when too many nodes are down, slow or refuse
    /// the client; retryable unless the nodes' non-retryable errors (a wrong password) alone
    /// prevented the quorum.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    async fn ping(&self) -> Result<(), LockError> {
        let calls = self.shared.nodes.iter().enumerate().map(|(i, node)| {
            let lock = Arc::clone(&node.lock);
            async move { (i, lock.as_ref().ping().await) }
        });
        let deadline = Instant::now() + PING_TIMEOUT;
        let verdict = Fanout::new(&self.shared, Op::Connect, |()| true, calls, deadline)
            .decide(Until::Quorum)
            .await;
        match verdict.decision {
            Decision::Quorum => Ok(()),
            Decision::NoQuorum => Err(verdict.no_quorum(Op::Connect)),
        }
    }

    /// Subscribes to the releases of `name` on every node that can announce them (each bounded
    /// by the release timeout) and merges them into one signal. `Some` when at least
    /// `N − quorum + 1` nodes subscribed — then every quorum release reaches one of them, so no
    /// release is missed — else `Ok(None)` and waiters poll. Lets a `Locker` waiting on a
    /// Redlock wake up on another process's release instead of at its next backoff.
    ///
    /// # Errors
    /// None of its own: nodes that fail to subscribe are left out (`Ok(None)` if too many do).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the nodes' subscriptions made so far are dropped with it.
    async fn watch(&self, name: &str) -> Result<Option<ReleaseWatch>, LockError> {
        crate::watch::watch(&self.shared, name, self.shared.release_timeout()).await
    }

    /// Who holds `name`, as a quorum of the nodes says: reads every node's holder at once
    /// (each node's own `describe_holder`, bounded by the release timeout) and decides:
    ///
    /// 1. **a grant named by a quorum**: when at least `N/2 + 1` nodes show a note that names
    ///    the same Redlock grant ([`annotate`](Lock::annotate) writes it on every node, with a
    ///    digest of the lease's token and the lease's fencing token), that grant holds the
    ///    lock. Its [`Holder::fencing_token`] is the Redlock lease's own — what the holder's
    ///    `Guard::fencing_token` says, so an election's observers report the leader's own term
    ///    — its note the one a quorum of those nodes carries byte for byte (none while they
    ///    disagree: a new note being written), its TTL the quorum-th longest of those nodes'
    ///    (when fewer than a quorum of its keys are left), less the time the read took and the
    ///    drift allowance. Nodes down, slow, free, or holding another key do not change it.
    /// 2. **a holder without a name**: else, when more than `N − quorum` nodes hold a key (an
    ///    acquire now would be busy), a holder that wrote no note on a quorum — a grant that
    ///    never annotated (a plain `locker.lock(..)`), one whose note is still being written,
    ///    another client's keys (node-redlock, redsync). Described with term 0 (the nodes'
    ///    own fencing tokens are not the Redlock lease's, and which grant holds the keys cannot
    ///    be told) and no note, its TTL the time until the lock would stop being busy.
    /// 3. **nobody**: `Ok(None)` when a quorum of nodes holds no key.
    /// 4. Otherwise failed nodes leave it open: an error.
    ///
    /// It answers as soon as the nodes still out cannot change the answer (a quorum named one
    /// grant and its note, or a quorum is free), else once every node answered or the timeout
    /// passed; reads still out are dropped. The nodes are read one after the other in time, not
    /// in one atomic step: each node's answer is atomic, and the answer above is what a quorum
    /// said during the read. It never shows a note with a later grant: a node shows a note only
    /// beside the grant it was written for, and the record names that grant.
    ///
    /// # Errors
    /// [`LockError::Unsupported`] (kind `"holder"`, nothing sent) when a node cannot describe
    /// holders; [`LockError::InvalidInput`] for a bad name; a [`LockError::QuorumNotReached`]
    /// (op `acquire`; source [`QuorumNotReached`]) when failing nodes leave the answer open —
    /// retryable unless the nodes' non-retryable errors alone do.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    async fn describe_holder(&self, name: &str) -> Result<Option<Holder>, LockError> {
        self.check_holders()?;
        check_name(name)?;
        note::describe(&self.shared, name).await
    }

    /// Writes `note` beside `lease` on all N nodes at once, through each node's own `annotate`
    /// with the lease (its token is the same on every node; the node writes only where that
    /// token holds the key), as a record that names the grant: `distlock-redlock/1`, the first
    /// 16 bytes of SHA-256 of the token in hex, the lease's fencing token, a newline, then
    /// `note`. `Ok(true)` iff a quorum wrote it (the lease is ours on a quorum);
    /// `Ok(false)` iff too many nodes refused for a quorum (the lease is no longer ours:
    /// expired, maybe re-taken), `LockError::NotOwned` from the election's point of view. It
    /// waits, like a [`release`](Lock::release), for every node that is not lagging, up to the
    /// release timeout, so the note is on every healthy node when it returns (a lagging node's
    /// write is seen through in the background). A later note of the same grant replaces it on
    /// each node; while the new one is on fewer than a quorum, observers see the grant without
    /// a note.
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for a note over [`MAX_NOTE_BYTES`](crate::MAX_NOTE_BYTES)
    /// (nothing sent); [`LockError::Unsupported`] (kind `"holder"`, nothing sent) when a node
    /// cannot keep notes; a [`LockError::QuorumNotReached`] (op `extend`; source
    /// [`QuorumNotReached`]) when failing nodes prevent a quorum — the note may be written on
    /// some nodes, and observers see it once a quorum carries it.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the note is written or not on each node (the writes sent are seen
    /// through in the background).
    ///
    /// [`QuorumNotReached`]: crate::QuorumNotReached
    async fn annotate(&self, lease: &Lease, note: &[u8]) -> Result<bool, LockError> {
        self.check_holders()?;
        note::annotate(&self.shared, lease, note).await
    }
}

/// A Redlock's capability table over nodes declaring `nodes`, `quorum` of which grant: see
/// [`Redlock`]'s `capabilities` for the reasons.
fn capabilities_over(
    nodes: impl ExactSizeIterator<Item = lock_core::backend::Capabilities>,
    quorum: usize,
) -> lock_core::backend::Capabilities {
    use lock_core::backend::{Capabilities, Fencing, MultiLock, TokenScale};
    let needed = nodes.len().saturating_sub(quorum) + 1;
    let (mut announcing, mut clock, mut none, mut all, mut holders) = (0, 0, 0, 0, 0);
    let mut delaying = 0;
    for node in nodes {
        all += 1;
        announcing += usize::from(node.announces_releases);
        holders += usize::from(node.holders);
        delaying += usize::from(node.lock_delay);
        match node.fencing {
            Fencing::Strict(TokenScale::Clock) | Fencing::AfterHolding => clock += 1,
            Fencing::None => none += 1,
            _ => {}
        }
    }
    let fencing = if all > 0 && clock == all {
        Fencing::AfterHolding
    } else if all > 0 && none == all {
        Fencing::None
    } else {
        Fencing::Unordered
    };
    Capabilities::MUTEX
        .with_multi(MultiLock::InOrder)
        .with_fencing(fencing)
        .with_announcements(announcing >= needed)
        .with_holders(all > 0 && holders == all)
        // A successor's quorum shares a node with the holder's, but which one is not known:
        // every node must keep a lease for its TTL for the delay to hold.
        .with_lock_delay(all > 0 && delaying == all)
        // Its holder's fencing token is known only from the note its grant wrote (the
        // nodes' own tokens differ): a revocation could not name the grant.
        .with_holder_tokens(false)
        // No fence of its own: a fence is one store's record, and a Redlock's token comes
        // from a quorum of stores. Its tokens fence a store of the user's (README, "Fencing
        // tokens"), as far as `fencing` says they are ordered.
        .with_guarded_writes(false)
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self
            .shared
            .nodes
            .iter()
            .map(|n| format!("{}: {}", n.label, n.lock.backend()))
            .collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("quorum", &self.quorum())
            .field("node_timeout", &self.shared.config.node_timeout)
            .field("drift_factor", &self.shared.config.drift_factor)
            .field("drift_constant", &self.shared.config.drift_constant)
            .finish()
    }
}
