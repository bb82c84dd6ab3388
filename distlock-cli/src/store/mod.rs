//! The stores the command works on, behind one trait: every subcommand (`ls`, `show`,
//! `release`, `run`, `run --leader`, `leader`, `watch`, `migrate`, `serve`) is written once
//! against [`Store`], and each backend implements it in a file of its own (`redis.rs`,
//! `etcd.rs`, ...). The URL's scheme picks the backend ([`connect`]).
//!
//! What a store reads is the same shape everywhere ([`LockInfo`]): `ls`, `show`, `watch`, the
//! JSON documents and the web console print one thing whatever the backend.

mod etcd;
mod mysql;
mod mysql_target;
mod object_store;
mod postgres;
mod redis;
mod redlock;
mod scheme;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use lock_core::backend::{Inspect, ListOptions, Lock, NamePattern, ReleaseFeed};
use lock_core::{Guard, Locker};

use crate::cli::{ScanArgs, TargetArgs};
use crate::exit::Failure;
use crate::inspect::{Listing, LockInfo};

pub(crate) use scheme::Scheme;

/// A store of locks as the command sees it: read (every kind), released by token, used
/// through the library's `Lock` (`run`, elections), and followed (`watch`).
#[async_trait]
pub(crate) trait Store: Send + Sync {
    /// The backend's name, in messages and `--json` (`redis`, `etcd`, `postgres`, `redlock`).
    fn backend(&self) -> &'static str;

    /// The store's operator reads, which its backend crate implements beside its layout
    /// (lock-core's `Inspect`); `None` while a store still reads here.
    fn inspector(&self) -> Option<&dyn Inspect> {
        None
    }

    /// Every held lock (of every kind) whose name matches the glob `pattern`, sorted by name
    /// and kind, as the store keeps them (the backend's part of [`Store::list`]): its
    /// inspector's listing.
    ///
    /// # Errors
    /// A usage failure for a bad pattern; a backend failure when the store fails or is slow.
    async fn scan(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        let pattern = NamePattern::new(pattern)?;
        let options = ListOptions::default()
            .batch(scan.count)
            .foreign(scan.foreign);
        let listing = self.inspection()?.list(&pattern, &options).await?;
        Ok(Listing::from_held(listing))
    }

    /// Every held lock named `name` (one name may be held as several kinds), as the store keeps
    /// them (the backend's part of [`Store::describe`]); empty when it is not held.
    ///
    /// # Errors
    /// A backend failure when the store fails or is slow.
    async fn read(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        let held = self.inspection()?.inspect(name).await?;
        Ok(held.into_iter().map(LockInfo::from_held).collect())
    }

    /// [`Store::inspector`], or a failure saying this store has none.
    ///
    /// # Errors
    /// A usage failure when the store has no inspector.
    fn inspection(&self) -> Result<&dyn Inspect, Failure> {
        self.inspector().ok_or_else(|| {
            Failure::new(
                crate::exit::USAGE,
                format!("{} offers no operator reads", self.backend()),
            )
        })
    }

    /// [`Store::scan`], with the elections among the locks shown as such (kind `election`,
    /// with their leader).
    ///
    /// # Errors
    /// As [`Store::scan`].
    async fn list(&self, pattern: &str, scan: &ScanArgs) -> Result<Listing, Failure> {
        let mut listing = self.scan(pattern, scan).await?;
        listing.locks.iter_mut().for_each(LockInfo::find_election);
        crate::inspect::fold_revocations(&mut listing.locks);
        crate::coordination::fold(&mut listing.locks);
        crate::waiters::fold(&mut listing.locks);
        Ok(listing)
    }

    /// [`Store::read`] of a valid name, with an election shown as such. The name is checked
    /// here, once for every store, by the library's rule (`lock_core::check_name`).
    ///
    /// # Errors
    /// A usage failure for an empty or over-long name; as [`Store::read`].
    async fn describe(&self, name: &str) -> Result<Vec<LockInfo>, Failure> {
        lock_core::check_name(name)?;
        let mut locks = self.read(name).await?;
        locks.iter_mut().for_each(LockInfo::find_election);
        // A pending revocation request is a record of its own: one more read, for the hold's
        // grant only.
        for lock in &mut locks {
            let Some((record, fencing_token)) = crate::inspect::revocation_record_of(lock) else {
                continue;
            };
            if lock_core::check_name(&record).is_err() {
                continue;
            }
            if let Some(found) = self.read(&record).await?.first() {
                lock.revocation = Some(crate::inspect::Revocation {
                    fencing_token,
                    note: crate::inspect::record_note(found),
                });
            }
        }
        // A latch or a barrier of this name is kept in records of their own.
        for record in crate::coordination::record_names(name) {
            if lock_core::check_name(&record).is_ok() {
                locks.extend(self.read(&record).await?);
            }
        }
        crate::coordination::fold(&mut locks);
        if !locks.is_empty() {
            locks.extend(crate::waiters::records_of(self.inspection()?, name).await?);
            crate::waiters::fold(&mut locks);
        }
        Ok(locks)
    }

    /// [`Store::release_token`] of a valid name (checked here, once for every store).
    ///
    /// # Errors
    /// A usage failure for an empty or over-long name; as [`Store::release_token`].
    async fn release(&self, name: &str, token: &str) -> Result<bool, Failure> {
        lock_core::check_name(name)?;
        self.release_token(name, token).await
    }

    /// [`Store::holding_session`] of a valid name (checked here, once for every store).
    ///
    /// # Errors
    /// A usage failure for an empty or over-long name; as [`Store::holding_session`].
    async fn holding(&self, name: &str) -> Result<Option<Session>, Failure> {
        lock_core::check_name(name)?;
        self.holding_session(name).await
    }

    /// Releases `name` if it is held with `token` (the string `ls` and `show` print), waking
    /// its waiters; `Ok(false)` when it is held with another token or not held (nothing
    /// changed).
    ///
    /// # Errors
    /// A backend failure when the store fails or is slow.
    async fn release_token(&self, name: &str, token: &str) -> Result<bool, Failure> {
        Ok(self.inspection()?.release_token(name, token).await?)
    }

    /// The library's lock on this store, for `run`, `run --leader` and `leader`. With
    /// `describe`, each grant describes its holder (host, pid, since, and `describe` as the
    /// note) if the store writes that with the grant itself ([`Store::describes_grants`]);
    /// else `run` writes it after the grant ([`describe_grant`]).
    ///
    /// # Errors
    /// A usage failure for settings the library refuses.
    fn lock(&self, describe: Option<&str>) -> Result<Arc<dyn Lock>, Failure>;

    /// Whether [`Store::lock`] with a description writes it with each grant (no extra round
    /// trip); when not, `run` annotates the grant.
    fn describes_grants(&self) -> bool {
        false
    }

    /// Starts counting the releases announced on the store, for `watch`'s RELEASES/S (its
    /// inspector's release feed); `None` when the store announces none that can be counted.
    ///
    /// # Errors
    /// A backend failure when subscribing fails.
    async fn releases(&self) -> Result<Option<Box<dyn Releases>>, Failure> {
        let Some(inspector) = self.inspector() else {
            return Ok(None);
        };
        Ok(inspector
            .release_feed()
            .await?
            .map(|feed| Box::new(Feed(feed)) as Box<dyn Releases>))
    }

    /// The session that holds `name` where the store binds a lock to a session rather than
    /// to a token (PostgreSQL's advisory locks), for `release --force`, which ends that
    /// session instead of comparing a token; `None` when no such session holds it, and on
    /// stores without such locks.
    ///
    /// # Errors
    /// A usage failure for a bad name; a backend failure when the store fails or is slow.
    async fn holding_session(&self, name: &str) -> Result<Option<Session>, Failure> {
        let _ = name;
        Ok(None)
    }

    /// Ends `session` if it still holds `name` (PostgreSQL: `pg_terminate_backend`), and
    /// answers whether the lock is free afterwards.
    ///
    /// # Errors
    /// A failure when the store has no sessions to end, refuses (no right to end it), fails or
    /// is slow.
    async fn end_session(&self, name: &str, session: &Session) -> Result<bool, Failure> {
        let _ = (name, session);
        Err(Failure::new(
            crate::exit::USAGE,
            format!("{} binds no lock to a session", self.backend()),
        ))
    }

    /// `distlock migrate`: installs what fenced writes need, and says what it did (one line,
    /// and a JSON object).
    ///
    /// # Errors
    /// A usage failure when there is nothing to install on this store; a backend failure when
    /// the store refuses.
    async fn migrate(&self) -> Result<(String, serde_json::Value), Failure>;
}

/// A server session that holds a lock by itself (no token): what `release --force` ends.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The server process of the session (PostgreSQL's backend pid).
    pub(crate) pid: i32,
    /// Who it is, for the confirmation question: application, client, user, since when.
    pub(crate) about: String,
}

/// Releases announced on a store, counted between two refreshes of `watch`.
#[async_trait]
pub(crate) trait Releases: Send {
    /// Follows the locks just listed (a store without pattern subscriptions subscribes to
    /// their channels), and takes this watcher's own subscriptions out of their waiters.
    async fn follow(&mut self, locks: &mut [LockInfo]);

    /// Releases per second per lock name since the last call (`seconds` ago); the counts
    /// start again from zero.
    fn take_rates(&mut self, seconds: f64) -> std::collections::HashMap<String, f64>;
}

/// [`Releases`] over a backend inspector's release feed.
struct Feed(Box<dyn ReleaseFeed>);

#[async_trait]
impl Releases for Feed {
    async fn follow(&mut self, locks: &mut [LockInfo]) {
        let names: Vec<&str> = locks.iter().map(|l| l.name.as_str()).collect();
        let own = self.0.follow(&names).await;
        for lock in locks.iter_mut() {
            if let Some(own) = own.get(&lock.name) {
                lock.waiters = lock.waiters.saturating_sub(*own);
            }
        }
    }

    fn take_rates(&mut self, seconds: f64) -> std::collections::HashMap<String, f64> {
        self.0
            .take_counts()
            .into_iter()
            // Counts far below 2^52: exact as f64.
            .map(|(name, n)| (name, n as f64 / seconds))
            .collect()
    }
}

/// Connects to the store the URLs name (their scheme picks the backend; see [`Scheme`]).
///
/// # Errors
/// A usage failure for an unknown scheme, URLs of different backends mixed, or a URL that does
/// not parse; a backend failure when the store does not answer.
pub(crate) async fn connect(args: &TargetArgs) -> Result<Box<dyn Store>, Failure> {
    match Scheme::of_all(&args.url, args.redlock)? {
        Scheme::Redis => Ok(Box::new(crate::connect::Target::connect(args).await?)),
        Scheme::Etcd => Ok(Box::new(etcd::EtcdTarget::connect(args).await?)),
        Scheme::Postgres => Ok(Box::new(postgres::PostgresTarget::connect(args).await?)),
        Scheme::Redlock => Ok(Box::new(redlock::RedlockTarget::connect(args).await?)),
        Scheme::ObjectStore => Ok(Box::new(
            object_store::ObjectStoreTarget::connect(args).await?,
        )),
        Scheme::Mysql => Ok(Box::new(mysql::MysqlTarget::connect(args).await?)),
    }
}

/// A locker over `store`'s lock (`run`, elections).
///
/// # Errors
/// As [`Store::lock`].
pub(crate) fn locker(store: &dyn Store, describe: Option<&str>) -> Result<Locker, Failure> {
    Ok(Locker::from_arc(store.lock(describe)?))
}

/// What this process says about itself as a holder or a waiter: host, pid, `note`, and since
/// when (this machine's clock, Unix ms), as JSON.
pub(crate) fn describe_here(note: &str) -> serde_json::Value {
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    serde_json::json!({
        "host": crate::host::hostname(),
        "pid": std::process::id(),
        "note": note,
        "since_ms": since_ms,
    })
}

/// Writes the holder's description beside `guard`'s grant with `Lock::annotate` (one round
/// trip, once per `run`), for stores that do not write it with the grant: the JSON a Redis
/// grant with holder metadata writes, `host`, `pid`, `note` and `since_ms` (no token: the
/// store's note already belongs to this grant alone), and `lock_delay_ms` with a lock-delay
/// (from which `show` and the console tell that the lease is over and the name delayed). A failure is only a warning: the lock is
/// held either way.
///
/// # Cancel safety
/// Cancel safe: dropped, the note is written or not; the lock is unaffected.
pub(crate) async fn describe_grant(
    lock: &dyn Lock,
    guard: &Guard,
    note: &str,
    lock_delay: Option<Duration>,
) {
    let mut description = describe_here(note);
    if let Some(delay) = lock_delay {
        description["lock_delay_ms"] = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX).into();
    }
    match lock
        .annotate(&guard.lease(), description.to_string().as_bytes())
        .await
    {
        Ok(_) => {}
        Err(error) => tracing::warn!(
            name = guard.name(),
            error = %crate::exit::one_line(&error),
            "the holder's description was not written"
        ),
    }
}
