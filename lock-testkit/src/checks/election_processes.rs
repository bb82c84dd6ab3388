//! Leader election across OS processes, shared by the backends' process tests: candidates in
//! child processes (the test binary re-run, [`crate::spawn_test_process`]), judged through an
//! independent witness, a Redis server of its own that no candidate uses for the election.
//!
//! A backend's test binary has one `#[ignore]`d child test that builds a [`Locker`] on its
//! backend, at the store its parent names ([`store`]), and calls [`candidate`]; its parent tests
//! name that child and the store in [`Candidates::new`] and call the checks on it:
//! [`Candidates::one_leader_at_a_time`], [`Candidates::paused_and_killed_leaders`],
//! [`Candidates::observer_sees_every_term`]. Each starts the witness and the candidates, and
//! panics with what went wrong. What the candidates do, by [`ROLE_VAR`]:
//!
//! - **rounds**: campaign, raise the witness counter (it must then be 1), record the term,
//!   work a little, lower the counter, resign; [`ROUNDS`] times. The parent checks that the
//!   counter never read more than 1 (exactly one leader at a time) and that the recorded terms
//!   strictly increase.
//! - **serve**: [`Election::run`](lock_core::Election::run) until [`SERVE_LIMIT`]: each term's
//!   work writes to a fenced resource in the witness every 50 ms with its term (a script that
//!   rejects a smaller term than the largest seen and logs every attempt in the same atomic
//!   step), and every term's start and end is logged. The parent SIGSTOPs the leader past its
//!   lease, then SIGKILLs the next one, and judges from the logs.
//!
//! ```ignore
//! #[tokio::test]
//! #[ignore = "a candidate process of the election tests"]
//! async fn candidate() {
//!     let lock = RedisLock::builder().url(&election::store()[0]).build().expect("lock");
//!     election::candidate(Locker::new(lock)).await;
//! }
//!
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn one_leader_at_a_time() {
//!     let server = RedisServer::start().expect("redis-server");
//!     Candidates::new(lock_testkit::child_test!(candidate), [server.url()])
//!         .one_leader_at_a_time()
//!         .await;
//! }
//! ```

use std::time::{Duration, Instant};

use lock_core::{Locker, TermEvent};
use nix::sys::signal::Signal;
use redis::aio::MultiplexedConnection;
use tokio::process::Child;

use crate::RedisServer;

/// The environment variable that carries the candidates' store to them: its address, or several
/// (a cluster's nodes, Redlock's masters, etcd's members) separated by commas; see [`store`].
pub const STORE_VAR: &str = "DISTLOCK_ELECTION_STORE";
/// The environment variable that carries the witness's URL to the candidates.
pub const WITNESS_VAR: &str = "DISTLOCK_ELECTION_WITNESS";
/// The environment variable that tells a candidate what to do: `rounds`, `serve` or
/// `observe` (not a candidate: it logs what `Election::observe` yields).
pub const ROLE_VAR: &str = "DISTLOCK_ELECTION_ROLE";
/// The election the candidates campaign in.
pub const ELECTION: &str = "leader:processes";
/// The candidates' lease. The issue's bound for a new leader after the leader stopped or was
/// killed is this plus [`FAILOVER_SLACK`].
pub const LEASE: Duration = Duration::from_secs(2);
/// What the bound for a new leader allows beyond [`LEASE`]: a candidate's wake-up.
pub const FAILOVER_SLACK: Duration = Duration::from_secs(1);
/// How many terms each `rounds` candidate leads.
pub const ROUNDS: usize = 5;
/// How long a `serve` candidate runs at most (the parent kills it sooner).
pub const SERVE_LIMIT: Duration = Duration::from_secs(90);

/// The number of candidate processes of each check.
const CANDIDATES: usize = 3;
/// How often the parent reads the witness while it waits.
const POLL: Duration = Duration::from_millis(20);

/// The fenced resource: accepts `ARGV[2]` (a term) unless a larger one was accepted before,
/// and logs the attempt (`pid term accepted`) in the same atomic step, so the log is in the
/// order the resource saw the writes.
const FENCED_WRITE: &str = r"
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local term = tonumber(ARGV[2])
local ok = 0
if term >= last then
  redis.call('SET', KEYS[1], ARGV[2])
  ok = 1
end
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ok)
return ok
";
const RESOURCE: &str = "resource:term";
const WRITES: &str = "resource:writes";
const EVENTS: &str = "election:events";
const TERMS: &str = "election:terms";
const COUNTER: &str = "election:leaders";
const VIOLATIONS: &str = "election:violations";
const OBSERVED: &str = "election:observed";

/// In a candidate process: the addresses of the store its parent named in
/// [`Candidates::new`] ([`STORE_VAR`], split at the commas), in their order.
///
/// # Panics
/// When the environment lacks [`STORE_VAR`] (the process was not started by [`Candidates`]).
#[must_use]
pub fn store() -> Vec<String> {
    std::env::var(STORE_VAR)
        .expect("the candidates' store (DISTLOCK_ELECTION_STORE)")
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// One backend's candidates: the `#[ignore]`d child test that runs [`candidate`] on the backend
/// (named with [`child_test!`](crate::child_test)) and the store it campaigns in. Each check
/// starts its own witness and candidate processes, stops them when done, and panics with what
/// went wrong.
#[derive(Debug, Clone)]
pub struct Candidates {
    child: String,
    env: Vec<(&'static str, String)>,
}

impl Candidates {
    /// The candidates that the child test `child` runs, each at the store whose addresses are
    /// `store` (one, or several: a cluster's nodes, Redlock's masters, etcd's members), which
    /// the child reads with [`store`].
    ///
    /// # Panics
    /// When `store` is empty or an address holds a comma.
    pub fn new(
        child: impl Into<String>,
        store: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let store: Vec<String> = store.into_iter().map(Into::into).collect();
        assert!(!store.is_empty(), "the candidates need a store");
        assert!(
            store.iter().all(|address| !address.contains(',')),
            "a store address with a comma: {store:?}"
        );
        Self {
            child: child.into(),
            env: vec![(STORE_VAR, store.join(","))],
        }
    }

    /// Three candidates lead [`ROUNDS`] terms each: the witness counter never reads more than
    /// 1, and the terms, recorded inside them, strictly increase.
    ///
    /// # Panics
    /// When that breaks, or a process or the witness fails.
    pub async fn one_leader_at_a_time(&self) {
        one_leader_at_a_time(&self.child, &self.env)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Three `serve` candidates. The leader is SIGSTOPped: a new leader starts within
    /// [`LEASE`] + [`FAILOVER_SLACK`]; the old leader's late write with its term is rejected
    /// by the fenced resource; on SIGCONT its term ends as `Lost` (its `lost()` fired) and its
    /// work writes no more. Then the new leader is SIGKILLed: another starts within the same
    /// bound. Then that one is sent SIGTERM, to which its run is tied
    /// (`ElectionRun::stop_on(shutdown())`): its term ends as `Stopped` and another starts
    /// well within a lease (the graceful hand-off). Throughout, the resource never accepted a
    /// term smaller than one it had accepted.
    /// Prints how long each failover took, and returns it.
    ///
    /// # Panics
    /// When a check fails, or a process or the witness fails.
    pub async fn paused_and_killed_leaders(&self) -> Failovers {
        let failovers = paused_and_killed_leaders(&self.child, &self.env)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{failovers:?}");
        failovers
    }

    /// A fourth process observes (`Election::observe`) while three `serve` candidates lead in
    /// turn, each leader SIGKILLed once it has led: the observer sees every term that started
    /// while it ran, in increasing order, none twice and none skipped. For backends that
    /// describe their holders (`Capabilities::holders`).
    ///
    /// # Panics
    /// When that breaks, or a process or the witness fails.
    pub async fn observer_sees_every_term(&self) {
        observer_sees_every_term(&self.child, &self.env)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// A connection to the witness.
async fn witness(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("the witness URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the witness")
}

/// One write to the fenced resource with `term`, by process `pid`: whether it was accepted.
async fn fenced_write(conn: &mut MultiplexedConnection, pid: u32, term: u64) -> bool {
    let accepted: i64 = redis::Script::new(FENCED_WRITE)
        .key(RESOURCE)
        .key(WRITES)
        .arg(pid)
        .arg(term)
        .invoke_async(conn)
        .await
        .expect("the fenced write");
    accepted == 1
}

/// One command on the witness, its reply ignored.
async fn send(conn: &mut MultiplexedConnection, args: &[String]) {
    let mut cmd = redis::cmd(&args[0]);
    for arg in &args[1..] {
        cmd.arg(arg);
    }
    let () = cmd.query_async(conn).await.expect("a witness command");
}

/// The child's body: what a candidate does, by [`ROLE_VAR`], on `locker`'s backend.
///
/// # Panics
/// When the environment lacks the witness or the role, or the witness fails.
pub async fn candidate(locker: Locker) {
    let url = std::env::var(WITNESS_VAR).expect("the witness's URL");
    let role = std::env::var(ROLE_VAR).expect("the candidate's role");
    let mut conn = witness(&url).await;
    let pid = std::process::id();
    let election = locker
        .elect(ELECTION)
        .value(format!("pid {pid}"))
        .lease(LEASE);
    match role.as_str() {
        "rounds" => {
            for _ in 0..ROUNDS {
                let leadership = election.campaign().await.expect("campaign");
                let leaders: i64 = redis::cmd("INCR")
                    .arg(COUNTER)
                    .query_async(&mut conn)
                    .await
                    .expect("INCR");
                if leaders != 1 {
                    send(
                        &mut conn,
                        &[
                            "RPUSH".into(),
                            VIOLATIONS.into(),
                            format!("{pid} saw {leaders} leaders"),
                        ],
                    )
                    .await;
                }
                send(
                    &mut conn,
                    &["RPUSH".into(), TERMS.into(), leadership.term().to_string()],
                )
                .await;
                tokio::time::sleep(Duration::from_millis(30)).await;
                send(&mut conn, &["DECR".into(), COUNTER.into()]).await;
                leadership.resign().await.expect("resign while leading");
                tokio::time::sleep(Duration::from_millis(fastrand::u64(0..20))).await;
            }
        }
        "serve" => serve(&election, conn, pid).await,
        "observe" => observe(&election, conn).await,
        other => panic!("unknown role {other:?}"),
    }
}

/// `serve`: the campaign loop with fenced work, each term's start and end logged.
async fn serve(election: &lock_core::Election, mut conn: MultiplexedConnection, pid: u32) {
    let work_conn = conn.clone();
    // Tied to SIGTERM: a candidate told to stop gives its term up at once.
    let mut run = election
        .run(move |lease| {
            let mut conn = work_conn.clone();
            async move {
                let term = lease.fencing_token();
                // Bounded by the term: the run cancels this work when the leadership ends.
                loop {
                    fenced_write(&mut conn, pid, term).await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        })
        .stop_on(lock_core::shutdown());
    let deadline = tokio::time::Instant::now() + SERVE_LIMIT;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, run.next_event()).await {
        let line = match event {
            TermEvent::Started { term } => format!("start {pid} {term}"),
            TermEvent::Ended { term, end } => format!("end {pid} {term} {end:?}"),
            other => format!("other {pid} {other:?}"),
        };
        send(&mut conn, &["RPUSH".into(), EVENTS.into(), line]).await;
    }
    run.stop().await;
}

/// `observe`: logs every item of `Election::observe` (`TERM`, `none` or `error ...`) until
/// [`SERVE_LIMIT`].
async fn observe(election: &lock_core::Election, mut conn: MultiplexedConnection) {
    use futures::StreamExt;
    let mut stream = std::pin::pin!(election.observe());
    let deadline = tokio::time::Instant::now() + SERVE_LIMIT;
    while let Ok(Some(item)) = tokio::time::timeout_at(deadline, stream.next()).await {
        let line = match item {
            Ok(Some(leader)) => leader.term().to_string(),
            Ok(None) => "none".to_owned(),
            Err(error) => format!("error {error}"),
        };
        send(&mut conn, &["RPUSH".into(), OBSERVED.into(), line]).await;
    }
}

/// [`Candidates::observer_sees_every_term`]: `Err` with what went wrong.
async fn observer_sees_every_term(child: &str, env: &[(&str, String)]) -> Result<(), String> {
    let server = RedisServer::start().map_err(|e| format!("the witness: {e}"))?;
    let mut conn = witness(&server.url()).await;
    let with_role = |role: &str| {
        let mut env = env.to_vec();
        env.push((WITNESS_VAR, server.url()));
        env.push((ROLE_VAR, role.to_owned()));
        env
    };
    let mut observer = crate::spawn_test_process(child, &with_role("observe"))
        .map_err(|e| format!("the observer: {e}"))?;
    // It runs once it told the first state (nobody leads yet).
    let deadline = Instant::now() + Duration::from_secs(30);
    while list(&mut conn, OBSERVED).await.is_empty() {
        if Instant::now() >= deadline {
            return Err("the observer told nothing".into());
        }
        tokio::time::sleep(POLL).await;
    }
    let mut candidates = Vec::new();
    for _ in 0..CANDIDATES {
        candidates.push(
            crate::spawn_test_process(child, &with_role("serve"))
                .map_err(|e| format!("a candidate: {e}"))?,
        );
    }
    let mut term = 0;
    for _ in 0..CANDIDATES {
        let leader = wait_event(
            &mut conn,
            LEASE * 3 + Duration::from_secs(10),
            "a leader",
            |e| e.start && e.term > term,
        )
        .await?;
        term = leader.term;
        // Let the observer see this term (it reads at least every poll interval), then end it.
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Some(c) = candidates.iter_mut().find(|c| c.id() == Some(leader.pid)) {
            c.start_kill().map_err(|e| format!("SIGKILL: {e}"))?;
            let _ = c.wait().await;
        }
    }
    let started: Vec<u64> = events(&mut conn)
        .await
        .iter()
        .filter(|e| e.start)
        .map(|e| e.term)
        .collect();
    let last = *started.last().ok_or("no term started")?;
    // The last leader was killed: wait until the observer has told that it is gone.
    let deadline = Instant::now() + LEASE + Duration::from_secs(5);
    let observed = loop {
        let observed = list(&mut conn, OBSERVED).await;
        if observed.iter().rev().take(1).any(|o| o == "none") || Instant::now() >= deadline {
            break observed;
        }
        tokio::time::sleep(POLL).await;
    };
    let _ = observer.start_kill();
    for c in &mut candidates {
        let _ = c.start_kill();
        let _ = c.wait().await;
    }
    if let Some(error) = observed.iter().find(|o| o.starts_with("error")) {
        return Err(format!("the observer failed: {error}"));
    }
    let terms: Vec<u64> = observed.iter().filter_map(|o| o.parse().ok()).collect();
    if let Some(w) = terms.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "observed out of order or twice: {} then {} in {observed:?}",
            w[0], w[1]
        ));
    }
    let started: Vec<u64> = started.into_iter().filter(|t| *t <= last).collect();
    if terms != started {
        return Err(format!(
            "observed {observed:?}, but the terms were {started:?}"
        ));
    }
    Ok(())
}

/// [`Candidates::one_leader_at_a_time`]: `Err` with what went wrong.
async fn one_leader_at_a_time(child: &str, env: &[(&str, String)]) -> Result<(), String> {
    let server = RedisServer::start().map_err(|e| format!("the witness: {e}"))?;
    let mut env = env.to_vec();
    env.push((WITNESS_VAR, server.url()));
    env.push((ROLE_VAR, "rounds".to_owned()));
    crate::run_test_in_processes(child, &env, CANDIDATES, Duration::from_secs(120)).await?;
    let mut conn = witness(&server.url()).await;
    let violations: Vec<String> = list(&mut conn, VIOLATIONS).await;
    if !violations.is_empty() {
        return Err(format!("more than one leader at a time: {violations:?}"));
    }
    let terms: Vec<u64> = list(&mut conn, TERMS)
        .await
        .iter()
        .map(|t| t.parse().expect("a term"))
        .collect();
    if terms.len() != CANDIDATES * ROUNDS {
        return Err(format!(
            "{} terms recorded, not {}",
            terms.len(),
            CANDIDATES * ROUNDS
        ));
    }
    if let Some(w) = terms.windows(2).find(|w| w[1] <= w[0]) {
        return Err(format!(
            "a term did not increase: {} then {} in {terms:?}",
            w[0], w[1]
        ));
    }
    Ok(())
}

/// A list of the witness.
async fn list(conn: &mut MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("LRANGE")
}

/// A logged term event: `start PID TERM` or `end PID TERM HOW`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Event {
    start: bool,
    pid: u32,
    term: u64,
    how: String,
}

/// The term events logged so far.
async fn events(conn: &mut MultiplexedConnection) -> Vec<Event> {
    list(conn, EVENTS)
        .await
        .iter()
        .filter_map(|line| {
            let mut words = line.split(' ');
            let start = match words.next()? {
                "start" => true,
                "end" => false,
                _ => return None,
            };
            Some(Event {
                start,
                pid: words.next()?.parse().ok()?,
                term: words.next()?.parse().ok()?,
                how: words.next().unwrap_or("").to_owned(),
            })
        })
        .collect()
}

/// Waits (at most `limit`) for a logged event that `matches`.
async fn wait_event(
    conn: &mut MultiplexedConnection,
    limit: Duration,
    what: &str,
    matches: impl Fn(&Event) -> bool,
) -> Result<Event, String> {
    let deadline = Instant::now() + limit;
    // Bounded by the deadline.
    loop {
        if let Some(e) = events(conn).await.into_iter().find(&matches) {
            return Ok(e);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "no {what} within {limit:?}: {:?}",
                events(conn).await
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The fenced writes logged so far: (pid, term, accepted), in the resource's order.
async fn writes(conn: &mut MultiplexedConnection) -> Vec<(u32, u64, bool)> {
    list(conn, WRITES)
        .await
        .iter()
        .filter_map(|line| {
            let mut w = line.split(' ');
            Some((
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
                w.next()? == "1",
            ))
        })
        .collect()
}

/// Sends `signal` to a candidate by its PID.
fn signal(child: &Child, sig: Signal) -> Result<(), String> {
    let pid = child.id().ok_or("the candidate has exited")?;
    crate::signal::send(pid, sig).map_err(|e| format!("{sig} to {pid}: {e}"))
}

/// What the parent measured: how long each hand-over took.
#[derive(Debug, Clone, Copy)]
pub struct Failovers {
    /// From the leader's SIGSTOP to the next leader's start.
    pub after_pause: Duration,
    /// From the next leader's SIGKILL to the one after's start.
    pub after_kill: Duration,
    /// From the SIGTERM of the leader after that (its run tied to `shutdown()`) to the next
    /// leader's start.
    pub after_term: Duration,
}

/// [`Candidates::paused_and_killed_leaders`]: `Err` with what went wrong.
async fn paused_and_killed_leaders(
    child: &str,
    env: &[(&str, String)],
) -> Result<Failovers, String> {
    let server = RedisServer::start().map_err(|e| format!("the witness: {e}"))?;
    let mut env = env.to_vec();
    env.push((WITNESS_VAR, server.url()));
    env.push((ROLE_VAR, "serve".to_owned()));
    let mut conn = witness(&server.url()).await;
    let mut candidates = Vec::new();
    for _ in 0..CANDIDATES {
        candidates
            .push(crate::spawn_test_process(child, &env).map_err(|e| format!("a candidate: {e}"))?);
    }
    let bound = LEASE + FAILOVER_SLACK;
    let first = wait_event(&mut conn, Duration::from_secs(30), "first leader", |e| {
        e.start
    })
    .await?;
    let paused = candidates
        .iter()
        .find(|c| c.id() == Some(first.pid))
        .ok_or("the first leader is not a candidate")?;
    // Let it write with its term before it stops.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !writes(&mut conn)
        .await
        .iter()
        .any(|w| w.1 == first.term && w.2)
    {
        if Instant::now() >= deadline {
            return Err("the first leader never wrote".into());
        }
        tokio::time::sleep(POLL).await;
    }

    signal(paused, Signal::SIGSTOP)?;
    let stopped = Instant::now();
    let second = wait_event(
        &mut conn,
        bound + Duration::from_secs(10),
        "leader after the pause",
        |e| e.start && e.term > first.term,
    )
    .await?;
    let after_pause = stopped.elapsed();
    if after_pause > bound {
        return Err(format!(
            "a new leader {after_pause:?} after the pause (bound {bound:?})"
        ));
    }
    // The new leader writes with its term; the old leader's late write is then rejected.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !writes(&mut conn)
        .await
        .iter()
        .any(|w| w.1 == second.term && w.2)
    {
        if Instant::now() >= deadline {
            return Err("the second leader never wrote".into());
        }
        tokio::time::sleep(POLL).await;
    }
    if fenced_write(&mut conn, first.pid, first.term).await {
        return Err("the paused leader's late write (its term) was accepted".into());
    }
    signal(paused, Signal::SIGCONT)?;
    let ended = wait_event(
        &mut conn,
        Duration::from_secs(10),
        "the paused leader's end",
        |e| !e.start && e.pid == first.pid && e.term == first.term,
    )
    .await?;
    if ended.how != "Lost" {
        return Err(format!(
            "the paused leader's term ended as {:?}, not Lost",
            ended.how
        ));
    }
    let count = |w: &[(u32, u64, bool)]| w.iter().filter(|w| w.1 == first.term).count();
    let before = count(&writes(&mut conn).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = count(&writes(&mut conn).await);
    if after != before {
        return Err(format!(
            "the paused leader's work wrote on after its term ended ({before} → {after})"
        ));
    }

    let killed = candidates
        .iter_mut()
        .find(|c| c.id() == Some(second.pid))
        .ok_or("the second leader is not a candidate")?;
    killed.start_kill().map_err(|e| format!("SIGKILL: {e}"))?;
    let at = Instant::now();
    let third = wait_event(
        &mut conn,
        bound + Duration::from_secs(10),
        "leader after the kill",
        |e| e.start && e.term > second.term,
    )
    .await?;
    let after_kill = at.elapsed();
    if after_kill > bound {
        return Err(format!(
            "a new leader {after_kill:?} after the kill (bound {bound:?})"
        ));
    }
    if third.pid == second.pid {
        return Err("the killed candidate led again".into());
    }
    // SIGTERM: the leader's run is tied to it (`ElectionRun::stop_on(shutdown())`), so it
    // resigns at once and the next candidate is elected well within a lease.
    let termed = candidates
        .iter()
        .find(|c| c.id() == Some(third.pid))
        .ok_or("the third leader is not a candidate")?;
    signal(termed, Signal::SIGTERM)?;
    let at = Instant::now();
    let fourth = wait_event(
        &mut conn,
        bound + Duration::from_secs(10),
        "leader after the SIGTERM",
        |e| e.start && e.term > third.term,
    )
    .await?;
    let after_term = at.elapsed();
    if after_term >= LEASE {
        return Err(format!(
            "a new leader {after_term:?} after the SIGTERM: the term ran out instead of \
             being given up"
        ));
    }
    let stopped = wait_event(
        &mut conn,
        Duration::from_secs(10),
        "the SIGTERMed leader's end",
        |e| !e.start && e.pid == third.pid && e.term == third.term,
    )
    .await?;
    if stopped.how != "Stopped" || fourth.pid == third.pid {
        return Err(format!(
            "the SIGTERMed leader's term ended as {:?} (not Stopped), or it led again",
            stopped.how
        ));
    }
    check_fence(&writes(&mut conn).await)?;
    for c in &mut candidates {
        let _ = c.start_kill();
        let _ = c.wait().await;
    }
    Ok(Failovers {
        after_pause,
        after_kill,
        after_term,
    })
}

/// The resource's log never shows a write accepted with a smaller term than an earlier
/// accepted one.
fn check_fence(writes: &[(u32, u64, bool)]) -> Result<(), String> {
    let mut largest = 0;
    for &(pid, term, accepted) in writes {
        if accepted && term < largest {
            return Err(format!(
                "{pid}'s write with term {term} accepted after term {largest}"
            ));
        }
        if accepted {
            largest = term;
        }
    }
    Ok(())
}
