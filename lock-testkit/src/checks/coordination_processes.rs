//! Latches and barriers across OS processes: a participant process SIGKILLed while it holds
//! its place breaks the latch for the waiter in another process, and is counted out of the
//! barrier the other member leaves, each within the participant's lease (and a wake-up) of the
//! kill. The participant is an `#[ignore]`d test of the backend's test binary that runs
//! [`participant`] (the self-re-exec pattern); the parent is the other party.

use std::time::Duration;

use lock_core::{LockError, Locker};
use tokio::time::Instant;

use crate::spawn_test_process;

/// The participant's store addresses, comma-separated (read with [`store`]).
pub const STORE_VAR: &str = "DISTLOCK_COORDINATION_STORE";
/// The participant's role: `latch` or `barrier`.
const ROLE_VAR: &str = "DISTLOCK_COORDINATION_ROLE";
/// The latch's or barrier's name.
const NAME_VAR: &str = "DISTLOCK_COORDINATION_NAME";

/// Every participant's lease: 2 s.
pub const LEASE: Duration = Duration::from_secs(2);
/// What the bound on being told allows beyond [`LEASE`]: a wait's poll and a round trip.
pub const SLACK: Duration = Duration::from_secs(1);
/// How long a participant process lives at most (its parent kills it sooner).
const PARTICIPANT_LIMIT: Duration = Duration::from_secs(60);
/// How long the parent waits for the participant to take its place.
const STARTUP: Duration = Duration::from_secs(30);
/// How often the parent reads the store while it waits for the participant.
const POLL: Duration = Duration::from_millis(20);

/// In a participant process: the addresses of the store its parent named in
/// [`Participants::new`], in their order.
///
/// # Panics
/// When the environment lacks [`STORE_VAR`] (the process was not started by
/// [`Participants`]).
#[must_use]
pub fn store() -> Vec<String> {
    std::env::var(STORE_VAR)
        .expect("the participants' store (DISTLOCK_COORDINATION_STORE)")
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// The child's body: joins the latch (role `latch`) or passes the barrier (role `barrier`)
/// named by its parent, of 2 parties, with a [`LEASE`], and holds its place until it is
/// killed (at most a minute).
///
/// # Panics
/// When the environment lacks the role or the name, or the store refuses.
pub async fn participant(locker: Locker) {
    let role = std::env::var(ROLE_VAR).expect("the participant's role");
    let name = std::env::var(NAME_VAR).expect("the latch's or barrier's name");
    match role.as_str() {
        "latch" => {
            let party = locker
                .latch(name, 2)
                .lease(LEASE)
                .join()
                .await
                .expect("a place");
            tokio::time::sleep(PARTICIPANT_LIMIT).await;
            drop(party);
        }
        "barrier" => {
            let member = locker
                .barrier(name, 2)
                .lease(LEASE)
                .wait_at_most(STARTUP)
                .enter()
                .await
                .expect("entered");
            tokio::time::sleep(PARTICIPANT_LIMIT).await;
            drop(member);
        }
        other => panic!("unknown role {other:?}"),
    }
}

/// One backend's participants: the `#[ignore]`d child test that runs [`participant`] on the
/// backend (named with [`child_test!`](crate::child_test)) and the store they meet in.
#[derive(Debug, Clone)]
pub struct Participants {
    child: String,
    store: String,
}

impl Participants {
    /// The participants that the child test `child` runs, each at the store whose addresses
    /// are `store` (read by the child with [`store`]).
    ///
    /// # Panics
    /// When `store` is empty.
    pub fn new(
        child: impl Into<String>,
        store: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        let store: Vec<String> = store.into_iter().map(Into::into).collect();
        assert!(!store.is_empty(), "the participants need a store");
        Self {
            child: child.into(),
            store: store.join(","),
        }
    }

    /// Starts a participant of `role` for `name`.
    fn start(&self, role: &str, name: &str) -> tokio::process::Child {
        spawn_test_process(
            &self.child,
            &[
                (STORE_VAR, self.store.clone()),
                (ROLE_VAR, role.to_owned()),
                (NAME_VAR, name.to_owned()),
            ],
        )
        .expect("a participant process")
    }

    /// A participant process joins a latch of 2 and is SIGKILLed; the parent counts down as
    /// the other party and waits: it is told [`LockError::Broken`] (one party lost) within
    /// [`LEASE`] + [`SLACK`] of the kill. Returns how long after the kill it was told.
    ///
    /// # Panics
    /// When the participant does not join, or the waiter is told something else or late.
    pub async fn a_killed_party_breaks_the_latch(&self, locker: &Locker) -> Duration {
        let name = unique("latch");
        let latch = locker
            .latch(name.as_str(), 2)
            .lease(LEASE)
            .wait_at_most(LEASE + SLACK + STARTUP);
        let child = self.start("latch", &name);
        until(
            // Joined: its place, then its record (killed between the two, it never joined).
            || async {
                latch
                    .state()
                    .await
                    .is_ok_and(|s| s.parties == 1 && s.joined == 1)
            },
            "joined",
        )
        .await;
        let killed = kill(child).await;
        latch.count_down().await.expect("the parent's count-down");
        let told = latch.wait().await;
        let after = killed.elapsed();
        assert!(
            matches!(told, Err(LockError::Broken { lost: 1, .. })),
            "the waiter of {name}, whose other party was killed: {told:?}"
        );
        assert!(
            after <= LEASE + SLACK,
            "told {after:?} after the kill; the lease is {LEASE:?}"
        );
        after
    }

    /// A participant process and the parent pass a barrier of 2; the participant is
    /// SIGKILLed and the parent leaves: its `leave` ends within [`LEASE`] + [`SLACK`] of the
    /// kill (the killed member counted out), and not before a third of the lease (the killed
    /// member's lease, renewed every third of it, ran that long at least). Returns how long
    /// after the kill the leave ended.
    ///
    /// # Panics
    /// When the barrier does not open, or the leave ends early, late or with an error.
    pub async fn a_killed_member_is_counted_out(&self, locker: &Locker) -> Duration {
        let name = unique("barrier");
        let barrier = locker
            .barrier(name.as_str(), 2)
            .lease(LEASE)
            .wait_at_most(LEASE + SLACK + STARTUP);
        let child = self.start("barrier", &name);
        let member = barrier.enter().await.expect("the parent passes");
        until(
            || async { barrier.state().await.is_ok_and(|s| s.passed == 2) },
            "passed",
        )
        .await;
        let killed = kill(child).await;
        member.leave().await.expect("the leave after a kill");
        let after = killed.elapsed();
        assert!(
            after >= LEASE / 3 && after <= LEASE + SLACK,
            "{name}'s leave ended {after:?} after the kill; the lease is {LEASE:?}"
        );
        after
    }
}

/// SIGKILLs the participant by its PID, waits for it to be gone, and says when.
async fn kill(mut child: tokio::process::Child) -> Instant {
    child.start_kill().expect("SIGKILL the participant");
    let _ = child.wait().await;
    Instant::now()
}

/// A name of its own for each check.
fn unique(what: &str) -> String {
    format!(
        "coordination:{what}:{}:{}",
        std::process::id(),
        fastrand::u64(..)
    )
}

/// Waits (at most [`STARTUP`]) until `ready` says the participant has done `what`.
async fn until<F, Fut>(ready: F, what: &str)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + STARTUP;
    while !ready().await {
        assert!(Instant::now() < deadline, "the participant has not {what}");
        tokio::time::sleep(POLL).await;
    }
}
