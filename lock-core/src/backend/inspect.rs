//! Operator reads: what a tool outside the lock's own grants needs to list the locks a store
//! holds, tell who holds one, and free a lock whose holder is gone (`distlock ls`, `show`,
//! `release --token`, `watch`, the console of `distlock serve`).
//!
//! Each backend implements [`Inspect`] beside the layout it reads (its `inspect.rs`), so no
//! other crate reads that layout as strings; a lock hands its inspector out through
//! [`Lock::inspector`](super::Lock::inspector). What it reads is one shape for every store
//! ([`HeldLock`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::NamePattern;
use crate::LockError;

/// How a name is held, as an inspection finds it: the library's kinds
/// ([`Kind`](crate::Kind)), plus what the store holds without the library's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeldKind {
    /// An exclusive lock.
    Mutex,
    /// A fair (first come, first served) exclusive lock.
    Fair,
    /// A read-write lock held by readers (its holders are the readers).
    Read,
    /// A read-write lock held by its writer.
    Write,
    /// A counting semaphore (its holders hold permits).
    Semaphore,
    /// A lock the server binds to a client session, with no token of its own: PostgreSQL's
    /// advisory locks, MySQL's `GET_LOCK`. Released with the session (`release --force`).
    Session,
    /// A key another client wrote under a lock's name (redis-py, node-redlock, redsync): a
    /// string with a TTL whose value is not a distlock token. Listed only when asked for.
    Foreign,
}

impl HeldKind {
    /// The kind's word in output and metric labels: `mutex`, `fair`, `read`, `write`,
    /// `semaphore`, `session`, `foreign`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::Fair => "fair",
            Self::Read => "read",
            Self::Write => "write",
            Self::Semaphore => "semaphore",
            Self::Session => "session",
            Self::Foreign => "foreign",
        }
    }
}

impl std::fmt::Display for HeldKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of an inspected lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderView {
    /// The holder's token as the store keeps it: the string [`Inspect::release_token`] takes
    /// (and `ls` prints). For a [`HeldKind::Session`] lock, the server's session id.
    pub token: String,
    /// The fencing token of the holder's grant, where the store issues one per holder.
    pub fencing_token: Option<u64>,
    /// What is left of the holder's lease (server clock where the store has one); `None` when
    /// the store cannot tell or the hold never expires (a session's lock).
    pub ttl: Option<Duration>,
    /// When the holder was granted the lock (by the store's clock where it keeps one, else by
    /// the holder's own), where the store records it.
    pub since: Option<SystemTime>,
    /// The note written beside this grant (holder metadata, an election's record).
    pub note: Option<Arc<[u8]>>,
    /// The permits it holds (semaphores).
    pub permits: Option<u64>,
}

impl HolderView {
    /// A holder with `token` and nothing else known.
    #[must_use]
    pub fn new(token: impl Into<String>) -> Self {
        Self {
            token: token.into(),
            ..Self::default()
        }
    }

    /// The same holder, with the fencing token of its grant.
    #[must_use]
    pub fn fencing_token(mut self, fencing_token: u64) -> Self {
        self.fencing_token = Some(fencing_token);
        self
    }

    /// The same holder, with `ttl` left.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// The same holder, granted at `since`.
    #[must_use]
    pub fn since(mut self, since: SystemTime) -> Self {
        self.since = Some(since);
        self
    }

    /// The same holder, with the note written beside its grant.
    #[must_use]
    pub fn note(mut self, note: impl Into<Arc<[u8]>>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// The same holder, holding `permits` permits.
    #[must_use]
    pub fn permits(mut self, permits: u64) -> Self {
        self.permits = Some(permits);
        self
    }
}

/// A replicated store's quorum verdict for one name (Redlock): how many of its members hold
/// the name with the holder's token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumView {
    /// Members that hold the name with this token.
    pub holding: usize,
    /// Members needed (`N/2 + 1`).
    pub required: usize,
    /// Members given (`N`).
    pub members: usize,
    /// Members that answered the read.
    pub answered: usize,
}

impl QuorumView {
    /// A verdict: `holding` of `members` (of which `answered` answered) hold the token,
    /// `required` are needed.
    #[must_use]
    pub fn new(holding: usize, required: usize, members: usize, answered: usize) -> Self {
        Self {
            holding,
            required,
            members,
            answered,
        }
    }

    /// Whether the holding members make a quorum.
    #[must_use]
    pub fn reached(&self) -> bool {
        self.holding >= self.required
    }
}

/// One member's own answer for a name on a replicated store (a Redlock master).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberAnswer {
    /// The member (`host:port`).
    pub member: String,
    /// The token its key holds, if any.
    pub token: Option<String>,
    /// Its key's remaining TTL.
    pub ttl: Option<Duration>,
    /// The last fencing token it issued for the name.
    pub fencing_token: Option<u64>,
    /// Whether it holds the quorum's token.
    pub agrees: bool,
    /// Why it gave no answer (down, slow), on one line.
    pub error: Option<String>,
}

impl MemberAnswer {
    /// The answer of `member`, nothing held.
    #[must_use]
    pub fn new(member: impl Into<String>) -> Self {
        Self {
            member: member.into(),
            ..Self::default()
        }
    }
}

/// One name held as one kind, as an inspection reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldLock {
    /// The lock's name (without the store's prefix).
    pub name: String,
    /// Where the store keeps it: the key, the table, the object's path.
    pub key: String,
    /// How it is held.
    pub kind: HeldKind,
    /// Its holders (the first [`MAX_HOLDERS_SHOWN`] of a shared kind), oldest grant first
    /// where the store tells.
    pub holders: Vec<HolderView>,
    /// How many holders it has (exact, even when `holders` is cut short).
    pub holder_count: u64,
    /// The last fencing token issued for the name (its counter), where the store keeps one.
    pub last_fencing_token: Option<u64>,
    /// A semaphore's permits: at most (the `max` of its grants).
    pub max_permits: Option<u64>,
    /// A semaphore's permits held now.
    pub permits_used: Option<u64>,
    /// Processes the store knows to be waiting for a release (its subscribers, where it
    /// counts them).
    pub waiters: u64,
    /// Waiters in line: a fair lock's queue, a read-write lock's writers waiting.
    pub queued: u64,
    /// A fair lock's queue, first in line first (tokens).
    pub queue: Vec<String>,
    /// The store member that keeps it (`host:port`), or the store's URL.
    pub node: String,
    /// A replicated store's quorum verdict (Redlock); `None` elsewhere.
    pub quorum: Option<QuorumView>,
    /// A replicated store's members' own answers ([`Inspect::inspect`] on Redlock); empty
    /// elsewhere.
    pub members: Vec<MemberAnswer>,
}

/// At most this many holders of a shared kind are listed per lock (their count is exact).
pub const MAX_HOLDERS_SHOWN: usize = 50;

impl HeldLock {
    /// `name`, kept at `key` on `node`, held as `kind` by nobody yet (holders are added with
    /// [`HeldLock::holder`]).
    #[must_use]
    pub fn new(
        name: impl Into<String>,
        key: impl Into<String>,
        kind: HeldKind,
        node: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            key: key.into(),
            kind,
            holders: Vec::new(),
            holder_count: 0,
            last_fencing_token: None,
            max_permits: None,
            permits_used: None,
            waiters: 0,
            queued: 0,
            queue: Vec::new(),
            node: node.into(),
            quorum: None,
            members: Vec::new(),
        }
    }

    /// The same lock with one more holder (counted; listed while under
    /// [`MAX_HOLDERS_SHOWN`]).
    #[must_use]
    pub fn holder(mut self, holder: HolderView) -> Self {
        self.holder_count += 1;
        if self.holders.len() < MAX_HOLDERS_SHOWN {
            self.holders.push(holder);
        }
        self
    }

    /// The first holder: an exclusive lock's only one.
    #[must_use]
    pub fn first_holder(&self) -> Option<&HolderView> {
        self.holders.first()
    }

    /// Whether it is held by a quorum, on a store that has quorums (else always).
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.quorum.is_none_or(|q| q.reached())
    }
}

/// What to list ([`Inspect::list`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ListOptions {
    /// Keys or rows read per step, where the store walks its keyspace in steps (Redis SCAN's
    /// COUNT).
    pub batch: u32,
    /// Also list [`HeldKind::Foreign`] keys (other clients' locks under lock names).
    pub foreign: bool,
}

impl ListOptions {
    /// The same options, reading `batch` keys or rows per step.
    #[must_use]
    pub fn batch(mut self, batch: u32) -> Self {
        self.batch = batch;
        self
    }

    /// The same options, listing foreign keys too (or not).
    #[must_use]
    pub fn foreign(mut self, foreign: bool) -> Self {
        self.foreign = foreign;
        self
    }
}

impl Default for ListOptions {
    fn default() -> Self {
        Self {
            batch: 1000,
            foreign: false,
        }
    }
}

/// What [`Inspect::list`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Listing {
    /// The held locks, sorted by name and kind.
    pub locks: Vec<HeldLock>,
    /// Keys, rows or objects read to find them.
    pub scanned: u64,
    /// Whether the walk stopped at its step limit before the end of the keyspace.
    pub truncated: bool,
}

impl Listing {
    /// A complete listing of `locks`, sorted here, found among `scanned` entries.
    #[must_use]
    pub fn new(mut locks: Vec<HeldLock>, scanned: u64) -> Self {
        locks.sort_by(|a, b| (&a.name, a.kind.as_str()).cmp(&(&b.name, b.kind.as_str())));
        Self {
            locks,
            scanned,
            truncated: false,
        }
    }
}

/// Releases announced on the store, counted for a watcher (`distlock watch`'s RELEASES/S).
#[async_trait]
pub trait ReleaseFeed: Send {
    /// Follows `names` (a store without pattern subscriptions subscribes to each one's
    /// channel) and answers, per name, how many of the store's waiters are this feed's own
    /// subscriptions (to leave out of [`HeldLock::waiters`]).
    ///
    /// # Cancel safety
    /// Cancel safe: a name not yet followed is followed on the next call.
    async fn follow(&mut self, names: &[&str]) -> HashMap<String, u64>;

    /// Releases counted per lock name since the last call; the counts start again from zero.
    fn take_counts(&mut self) -> HashMap<String, u64>;
}

/// A store's operator reads, implemented by each backend beside the layout it reads.
///
/// Every method changes nothing except [`Inspect::release_token`], and answers what the store
/// holds now, by every client of the same layout (other processes, other languages).
#[async_trait]
pub trait Inspect: Send + Sync {
    /// Every held lock (of every kind) whose name matches `pattern`, sorted by name and kind.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the store fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn list(
        &self,
        pattern: &NamePattern,
        options: &ListOptions,
    ) -> Result<Listing, LockError>;

    /// Every hold of `name` (one name may be held as several kinds; empty when free), with
    /// the store members' own answers on a replicated store. The name is checked here, once
    /// for every store ([`check_name`](crate::check_name)), then read by [`Inspect::read`].
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or over-long name;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the store fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn inspect(&self, name: &str) -> Result<Vec<HeldLock>, LockError> {
        crate::check_name(name)?;
        self.read(name).await
    }

    /// Releases `name` if a holder's token is `token` (as [`HolderView::token`] gives it), as
    /// that holder's own release would, waking its waiters; `Ok(false)` when no holder has
    /// that token (nothing changed). The name is checked here, once for every store, then
    /// released by [`Inspect::release_held`].
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] for an empty or over-long name;
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the store fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: the lock is released or left as it was.
    async fn release_token(&self, name: &str, token: &str) -> Result<bool, LockError> {
        crate::check_name(name)?;
        self.release_held(name, token).await
    }

    /// The backend's part of [`Inspect::inspect`]: every hold of the valid name `name`.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the store fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: it changes nothing.
    async fn read(&self, name: &str) -> Result<Vec<HeldLock>, LockError>;

    /// The backend's part of [`Inspect::release_token`], for the valid name `name`.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when the store fails or is slow.
    ///
    /// # Cancel safety
    /// Cancel safe: the lock is released or left as it was.
    async fn release_held(&self, name: &str, token: &str) -> Result<bool, LockError>;

    /// Starts counting the releases the store announces; `None` where it announces none that
    /// can be counted.
    ///
    /// # Errors
    /// [`LockError::Timeout`] / [`LockError::Backend`] when subscribing fails.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, nothing is followed.
    async fn release_feed(&self) -> Result<Option<Box<dyn ReleaseFeed>>, LockError> {
        Ok(None)
    }
}
