//! The store grace period: after a Redis may have lost grants (a restart without persistence, a
//! failover to a replica that lacked them), this client grants nothing there until the longest
//! lease could have run out. It is antirez's *delayed restart* ("Is Redlock safe?", 2016; the
//! Redis docs' "Performance, crash recovery and fsync") and Chubby's *lock-delay* (Burrows,
//! OSDI 2006), enforced from the client side: distlock controls every client of a distlock
//! fleet, so no server change is needed.
//!
//! Why it is safe: a holder whose key was lost keeps using its lease at most until its
//! `valid_until`, which is at most one lease after its last successful grant or renewal; that
//! came before the loss, and the loss came before anyone *saw* it. A grace of at least the
//! longest lease, counted from the moment a client saw the change, therefore ends after every
//! lease granted by the old data set has ended: a grant after it overlaps nobody.
//!
//! What is seen (on each new connection, from `INFO`; see `facts.rs`), by default: a new
//! `run_id` (a restart, which always breaks connections, or another server behind the same
//! address), a new replication id or a replica that became master (a promotion). This costs a
//! fresh Redis nothing: the first connection of a process has nothing to compare with. The
//! opt-in strict mode also covers a process that never saw the old server: a server that may
//! lose writes (no AOF fsynced on every write) and started less than the grace ago, and the
//! promotion marker that the clients who saw a change write into the data set.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use lock_core::{LockError, Op};
use redis::aio::ConnectionLike;
use tokio::time::Instant;

use crate::error::BACKEND;
use crate::metric;
use crate::safety::facts::{self, ServerFacts};
use crate::units::ms;

/// The grace period by default: [`lock_core::DEFAULT_LEASE`] (30 s), the lease a `Locker`
/// grants unless told otherwise. It must be at least the longest lease or `fixed_ttl` any
/// client of the same Redis uses (see [`grace`](crate::RedisLockBuilder::grace)).
pub const DEFAULT_GRACE: Duration = lock_core::DEFAULT_LEASE;

/// The server may evict lock keys under memory pressure, so a held lock can vanish and be
/// granted again: the `source` of the [`LockError::Backend`] (not retryable) with which a lock
/// built with [`strict(true)`](crate::RedisLockBuilder::strict) refuses every acquire there.
/// Remedy: `maxmemory-policy noeviction`, or a Redis of its own for locks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EvictionRisk {
    /// The server, as the lock names it in metrics and logs.
    pub server: String,
    /// Its `maxmemory-policy`.
    pub policy: String,
    /// Its `maxmemory`, in bytes.
    pub maxmemory: u64,
}

impl fmt::Display for EvictionRisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Redis {} may evict lock keys (maxmemory {} bytes, maxmemory-policy {}); \
             use maxmemory-policy noeviction or a Redis of its own for locks",
            self.server, self.maxmemory, self.policy
        )
    }
}

impl std::error::Error for EvictionRisk {}

/// A lock's grace settings, from its builder.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraceSettings {
    /// How long a server that may have lost grants grants nothing; zero turns the grace off.
    pub(crate) grace: Duration,
    /// Whether the strict checks (uptime, persistence, marker, eviction refusal) apply.
    pub(crate) strict: bool,
}

/// The grace state of one server (a single Redis, or the master a Sentinel names): what it last
/// said about itself, and until when it grants nothing.
pub(crate) struct GraceState {
    settings: GraceSettings,
    /// The server's label in logs and metrics.
    server: String,
    /// The marker key a client that saw a change writes (strict clients read it).
    marker: String,
    /// Whether `state` holds anything that may refuse a grant: read on every acquire, so the
    /// path without a grace period takes no lock.
    alert: AtomicBool,
    /// Whether a lease longer than the grace was logged already (once per lock).
    warned_long_lease: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The facts of the last connection that gave any.
    last: Option<ServerFacts>,
    /// The end of the current grace episode, if one is on.
    until: Option<Instant>,
    /// In strict mode, the eviction risk the last connection found.
    evicting: Option<EvictionRisk>,
    /// Whether the eviction risk was logged already (once per lock).
    warned_eviction: bool,
}

/// What a new connection learned: a grace episode that began with it, to record in the marker.
pub(crate) struct Learned {
    /// How long the new episode lasts, when this connection saw the server change.
    pub(crate) changed: Option<Duration>,
}

impl GraceState {
    /// The server's label in logs and metrics (`host:port`, `sentinel:<master>`, `pool`).
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn new(settings: GraceSettings, server: String, prefix: &str) -> Self {
        Self {
            settings,
            server,
            marker: format!("{prefix}{{distlock}}:grace"),
            alert: AtomicBool::new(false),
            warned_long_lease: AtomicBool::new(false),
            state: Mutex::new(State::default()),
        }
    }

    /// Whether nothing here can refuse a grant (zero grace, not strict): the acquire path then
    /// skips the check altogether.
    pub(crate) fn inert(&self) -> bool {
        self.settings.grace.is_zero() && !self.settings.strict
    }

    /// Logs once when a grant asks for a lease longer than the grace period: the grace then
    /// no longer outlasts every lease, which is its one rule.
    pub(crate) fn check_lease(&self, ttl: Duration) {
        let grace = self.settings.grace;
        if !grace.is_zero() && ttl > grace && !self.warned_long_lease.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(server = %self.server, lease = ?ttl, grace = ?grace,
                "a lease longer than the store grace period: after a restart or a failover this \
                 lock could be granted twice; give RedisLockBuilder::grace at least the longest lease");
        }
    }

    /// Reads the facts of the server at the other end of a new connection and compares them
    /// with the last ones: one `INFO` round trip (two more in strict mode: `CONFIG GET
    /// appendfsync` and the marker's `PTTL`; one `SET` when a change starts an episode).
    /// Failures are logged, not returned: a server that refuses `INFO` still grants, and the
    /// grace then cannot tell (the crate README says so).
    pub(crate) async fn learn<C: ConnectionLike + Send>(&self, conn: &mut C) {
        let facts = match facts::read(conn).await {
            Ok(facts) => facts,
            Err(error) => {
                tracing::debug!(%error, server = %self.server, "INFO failed; the grace period cannot tell a restart");
                return;
            }
        };
        let mut strict = Strict::default();
        if self.settings.strict {
            strict.fsync_always = facts.aof_enabled && facts::fsyncs_every_write(conn).await;
            strict.marker = self.read_marker(conn).await;
        }
        let learned = self.record(facts, &strict, Instant::now());
        if let Some(left) = learned.changed {
            self.write_marker(conn, left).await;
        }
    }

    /// The marker's time left, if a client that saw a change left one.
    async fn read_marker<C: ConnectionLike + Send>(&self, conn: &mut C) -> Option<Duration> {
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&self.marker)
            .query_async(conn)
            .await
            .ok()?;
        u64::try_from(pttl)
            .ok()
            .filter(|&ms| ms > 0)
            .map(Duration::from_millis)
    }

    /// Leaves the marker for strict clients that connect later (best effort; `NX`: the first
    /// client to see the change sets it, within milliseconds of the others).
    async fn write_marker<C: ConnectionLike + Send>(&self, conn: &mut C, left: Duration) {
        let written: redis::RedisResult<()> = redis::cmd("SET")
            .arg(&self.marker)
            .arg("restarted or promoted")
            .arg("NX")
            .arg("PX")
            .arg(ms(left).max(1))
            .exec_async(conn)
            .await;
        if let Err(error) = written {
            tracing::debug!(%error, "writing the grace marker failed");
        }
    }

    /// Compares `facts` with the last ones seen, at `now`; starts or lengthens the grace
    /// episode the rules call for (see the module docs).
    pub(crate) fn record(&self, facts: ServerFacts, strict: &Strict, now: Instant) -> Learned {
        let grace = self.settings.grace;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut learned = Learned { changed: None };
        if !facts.known() {
            return learned;
        }
        let mut episode: Option<(Duration, String)> = None;
        if let Some(reason) = state.last.as_ref().and_then(|last| changed(last, &facts)) {
            episode = Some((grace, reason.to_owned()));
            learned.changed = Some(grace).filter(|g| !g.is_zero());
        }
        if self.settings.strict {
            let keeps_writes = facts.aof_enabled && strict.fsync_always;
            if !keeps_writes && facts.uptime < grace {
                let left = grace - facts.uptime;
                let reason = format!(
                    "strict: it started {}s ago and does not fsync every write",
                    facts.uptime.as_secs()
                );
                episode = longer(episode, (left, reason));
            }
            if let Some(left) = strict.marker {
                let reason = "strict: another client saw it restart or get promoted".to_owned();
                episode = longer(episode, (left.min(grace), reason));
            }
        }
        if let Some((left, reason)) = episode.filter(|(left, _)| !left.is_zero()) {
            let until = now + left;
            let ongoing = state.until.is_some_and(|u| u > now);
            if !ongoing {
                tracing::warn!(server = %self.server, reason = %reason, grace = ?left,
                    "Redis may have lost lock grants; granting nothing there until the longest lease has run out");
            }
            state.until = Some(state.until.map_or(until, |u| u.max(until)));
            self.gauge(left);
        }
        self.eviction(&mut state, &facts);
        state.last = Some(facts);
        self.alert.store(
            state.until.is_some() || state.evicting.is_some(),
            Ordering::Release,
        );
        learned
    }

    /// Warns once and counts a memory policy that can evict lock keys; strict mode remembers it
    /// to refuse grants.
    fn eviction(&self, state: &mut State, facts: &ServerFacts) {
        if !facts.evicts_locks() {
            state.evicting = None;
            return;
        }
        let risk = EvictionRisk {
            server: self.server.clone(),
            policy: facts.maxmemory_policy.clone(),
            maxmemory: facts.maxmemory,
        };
        metrics::counter!(metric::EVICTION_RISK_TOTAL, "backend" => BACKEND,
            "server" => self.server.clone(), "policy" => risk.policy.clone())
        .increment(1);
        if !state.warned_eviction {
            state.warned_eviction = true;
            tracing::warn!(server = %self.server, policy = %risk.policy, maxmemory = risk.maxmemory,
                "{risk}: an evicted lock key is granted again while its holder still works");
        }
        state.evicting = self.settings.strict.then_some(risk);
    }

    /// Whether a grant may be sent now: `Ok(None)` yes, `Ok(Some(left))` not for `left` (the
    /// grace period), `Err` never (strict mode, a server that may evict lock keys).
    ///
    /// # Errors
    /// [`LockError::Backend`] (not retryable) with an [`EvictionRisk`] source, in strict mode.
    pub(crate) fn verdict(&self) -> Result<Option<Duration>, LockError> {
        // Nothing to tell (the usual case): answered without reading the clock, twice per grant.
        if !self.alert.load(Ordering::Acquire) {
            return Ok(None);
        }
        self.verdict_at(Instant::now())
    }

    /// [`Self::verdict`] at `now`.
    fn verdict_at(&self, now: Instant) -> Result<Option<Duration>, LockError> {
        if !self.alert.load(Ordering::Acquire) {
            return Ok(None);
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(risk) = &state.evicting {
            return Err(LockError::Backend {
                backend: BACKEND,
                op: Op::Acquire,
                retryable: false,
                source: Box::new(risk.clone()),
            });
        }
        let Some(until) = state.until else {
            return Ok(None);
        };
        if until > now {
            drop(state);
            let left = until - now;
            self.gauge(left);
            metrics::counter!(metric::GRACE_REFUSED_TOTAL, "backend" => BACKEND, "server" => self.server.clone())
                .increment(1);
            return Ok(Some(left));
        }
        state.until = None;
        self.alert
            .store(state.evicting.is_some(), Ordering::Release);
        drop(state);
        self.gauge(Duration::ZERO);
        tracing::info!(server = %self.server, "the grace period has ended; granting again");
        Ok(None)
    }

    fn gauge(&self, left: Duration) {
        metrics::gauge!(metric::GRACE_SECONDS, "backend" => BACKEND, "server" => self.server.clone())
            .set(left.as_secs_f64());
    }
}

/// What only strict mode reads on connect.
#[derive(Debug, Default)]
pub(crate) struct Strict {
    /// AOF with `appendfsync always`, as `CONFIG GET` said.
    pub(crate) fsync_always: bool,
    /// The marker's time left.
    pub(crate) marker: Option<Duration>,
}

/// Why `now` shows a server that may have lost grants since `last`, if it does.
fn changed(last: &ServerFacts, now: &ServerFacts) -> Option<&'static str> {
    if last.run_id != now.run_id {
        Some("a new run_id: the server restarted, or another one answers at its address")
    } else if !last.is_master() && now.is_master() {
        Some("a replica became master")
    } else if last.master_replid != now.master_replid {
        Some("a new replication id: the server was promoted or reloaded its data")
    } else {
        None
    }
}

/// The longer of two episodes.
fn longer(a: Option<(Duration, String)>, b: (Duration, String)) -> Option<(Duration, String)> {
    match a {
        Some(a) if a.0 >= b.0 => Some(a),
        _ => Some(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(run_id: &str, uptime: u64) -> ServerFacts {
        ServerFacts {
            run_id: run_id.into(),
            role: "master".into(),
            master_replid: format!("replid-{run_id}"),
            second_repl_offset: -1,
            uptime: Duration::from_secs(uptime),
            maxmemory: 0,
            maxmemory_policy: "noeviction".into(),
            aof_enabled: false,
        }
    }

    fn watch(grace: u64, strict: bool) -> GraceState {
        let settings = GraceSettings {
            grace: Duration::from_secs(grace),
            strict,
        };
        GraceState::new(settings, "test".into(), "")
    }

    #[test]
    fn a_first_connection_grants_at_once_a_restart_does_not() {
        let w = watch(10, false);
        let now = Instant::now();
        w.record(facts("a", 0), &Strict::default(), now);
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            None,
            "a fresh server: no grace"
        );
        w.record(facts("a", 5), &Strict::default(), now);
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            None,
            "the same server: no grace"
        );
        let learned = w.record(facts("b", 0), &Strict::default(), now);
        assert_eq!(learned.changed, Some(Duration::from_secs(10)));
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            Some(Duration::from_secs(10))
        );
        let later = now + Duration::from_secs(10);
        assert_eq!(
            w.verdict_at(later).expect("no refusal"),
            None,
            "the grace is over"
        );
    }

    #[test]
    fn a_promotion_starts_a_grace() {
        let w = watch(10, false);
        let mut replica = facts("a", 100);
        replica.role = "slave".into();
        w.record(replica, &Strict::default(), Instant::now());
        w.record(facts("a", 100), &Strict::default(), Instant::now());
        assert!(
            w.verdict().expect("no refusal").is_some(),
            "a replica that became master"
        );
    }

    #[test]
    fn strict_mode_reads_uptime_persistence_and_the_marker() {
        let w = watch(10, true);
        let now = Instant::now();
        w.record(facts("a", 4), &Strict::default(), now);
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            Some(Duration::from_secs(6))
        );

        let w = watch(10, true);
        let mut aof = facts("a", 4);
        aof.aof_enabled = true;
        let fsync = Strict {
            fsync_always: true,
            marker: None,
        };
        w.record(aof, &fsync, now);
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            None,
            "AOF fsynced on every write keeps grants"
        );

        let w = watch(10, true);
        let marked = Strict {
            fsync_always: false,
            marker: Some(Duration::from_secs(3)),
        };
        w.record(facts("a", 100), &marked, now);
        assert_eq!(
            w.verdict_at(now).expect("no refusal"),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn zero_grace_and_not_strict_is_inert() {
        assert!(watch(0, false).inert());
        assert!(!watch(0, true).inert());
    }

    #[test]
    fn strict_mode_refuses_a_server_that_evicts() {
        let mut evicting = facts("a", 100);
        evicting.maxmemory = 4 << 20;
        evicting.maxmemory_policy = "allkeys-lru".into();
        let lenient = watch(10, false);
        lenient.record(evicting.clone(), &Strict::default(), Instant::now());
        assert_eq!(
            lenient.verdict().expect("no refusal"),
            None,
            "by default, a warning only"
        );
        let strict = watch(10, true);
        strict.record(evicting, &Strict::default(), Instant::now());
        let err = strict.verdict().expect_err("refused");
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("redis"), "{err}");
    }
}
