//! The lock kinds on the lease table, one file each, and what they share: running a grant so
//! that it outlives its caller, the busy answer, extend and release by the lease's kind.
//!
//! The mutex is one statement (`INSERT … ON DUPLICATE KEY UPDATE`; a busy answer also reads
//! the row). The
//! kinds that decide on several rows at once (read-write, semaphore, fair, multi) run one
//! transaction that first locks the name's anchor row (`SELECT … FOR UPDATE`), so every
//! decision on a name is taken by one transaction at a time, with "now" read once from the
//! server's clock in that locking read.

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod mutex;
pub(crate) mod note;
pub(crate) mod read_write;
pub(crate) mod semaphore;

use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use lock_core::backend::Attempt;
use lock_core::{Kind, Lease, LockError, Op, Token, valid_until};
use tokio::time::Instant;

use crate::executor::{Executor, millis};
use crate::sql::LeaseTable;

/// A kind's attempt as the transaction answers it: granted with a fencing token, or busy for
/// this many ms (until the holder's lease ends or the head's entry lapses).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Outcome {
    Granted(u64),
    Busy(i64),
}

/// Runs the attempt `work` at `name` as `kind` for `token` so that it outlives its caller (a
/// grant, or the waiter's record of a busy attempt, is given back when nobody receives it),
/// and makes its answer an [`Attempt`].
pub(crate) async fn attempt(
    exec: &Executor,
    name: &str,
    kind: Kind,
    token: Token,
    ttl_ms: u64,
    work: BoxFuture<'static, Result<Outcome, LockError>>,
) -> Result<Attempt, LockError> {
    let started = Instant::now();
    let left_behind: fn(&Outcome) -> bool = if kind.records_waiter() {
        |_| true
    } else {
        |outcome| matches!(outcome, Outcome::Granted(_))
    };
    let owned = name.to_owned();
    let outcome = exec
        .grant(work, left_behind, move |exec| {
            async move {
                let lease = Lease::new(owned, token, 0, Instant::now()).with_kind(kind);
                if let Err(error) = release(&exec, &lease).await {
                    tracing::warn!(
                        name = lease.name(),
                        %error,
                        "releasing the grant of a cancelled acquire failed; it ends at its TTL"
                    );
                }
            }
            .boxed()
        })
        .await?;
    Ok(match outcome {
        Outcome::Granted(fence) => {
            let valid = valid_until(started, Duration::from_millis(ttl_ms));
            Attempt::Acquired(Lease::new(name, token, fence, valid).with_kind(kind))
        }
        Outcome::Busy(wait_ms) => busy(wait_ms),
    })
}

/// A busy answer: the holder's lease ends in `wait_ms`. Releases are not announced (MySQL has
/// no LISTEN/NOTIFY): waiters poll with the locker's backoff, bounded by that time.
pub(crate) fn busy(wait_ms: i64) -> Attempt {
    Attempt::Busy {
        holder_ttl: Some(Duration::from_millis(
            u64::try_from(wait_ms).unwrap_or_default(),
        )),
        announces: false,
    }
}

/// Milliseconds from the server's `now` (µs) until `until` (µs), rounded up, at least 0.
pub(crate) fn ms_until(until: i64, now: i64) -> i64 {
    (until.saturating_sub(now).max(0) + 999) / 1000
}

/// `now` (µs) plus `ttl_ms`.
pub(crate) fn plus_ms(now: i64, ttl_ms: u64) -> i64 {
    now.saturating_add(millis(ttl_ms).saturating_mul(1000))
}

/// The fencing token after `last`: larger than it, and at least the server's clock in µs.
pub(crate) fn next_fence(last: i64, now: i64) -> i64 {
    last.saturating_add(1).max(now)
}

/// A fencing token as the lease carries it.
pub(crate) fn fence(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Extends `lease` in the table its kind lives in: one `UPDATE` of its own row.
pub(crate) async fn extend(
    exec: &Executor,
    lease: &Lease,
    ttl_ms: u64,
) -> Result<Option<Instant>, LockError> {
    let sql = LeaseTable::of(lease.kind()).extend();
    let (name, hex) = owned(lease);
    let started = Instant::now();
    let affected = exec
        .run(
            Op::Extend,
            Box::new(move |c| {
                async move {
                    let done = sqlx::query(sql)
                        .bind(millis(ttl_ms))
                        .bind(&name)
                        .bind(&hex)
                        .execute(c)
                        .await?;
                    Ok(done.rows_affected())
                }
                .boxed()
            }),
        )
        .await?;
    Ok((affected > 0).then(|| valid_until(started, Duration::from_millis(ttl_ms))))
}

/// Releases `lease` as its kind does.
pub(crate) async fn release(exec: &Executor, lease: &Lease) -> Result<bool, LockError> {
    match lease.kind() {
        Kind::Read { .. } | Kind::Write { .. } => read_write::release(exec, lease).await,
        Kind::Semaphore { .. } => semaphore::release(exec, lease).await,
        Kind::Fair { .. } => fair::release(exec, lease).await,
        _ => mutex::release(exec, lease).await,
    }
}

/// The lease's name and token, owned (what a statement's work takes along).
pub(crate) fn owned(lease: &Lease) -> (String, String) {
    (
        lease.name().to_owned(),
        lease.token().to_hex().as_str().to_owned(),
    )
}

/// Runs one statement of `sql` with a name and a token as its parameters, answering whether it
/// affected a row.
pub(crate) async fn affects_row(
    exec: &Executor,
    op: Op,
    sql: &'static str,
    name: String,
    hex: String,
) -> Result<bool, LockError> {
    exec.run(
        op,
        Box::new(move |c| {
            async move {
                let done = sqlx::query(sql).bind(&name).bind(&hex).execute(c).await?;
                Ok(done.rows_affected() > 0)
            }
            .boxed()
        }),
    )
    .await
}

/// Locks the anchor row of `name` (`select` with `FOR UPDATE`), inserting a free one first
/// (`insert`) when the name has none yet. The insert is an `INSERT … ON DUPLICATE KEY UPDATE
/// name = name`, not an `INSERT IGNORE`: on a row a concurrent transaction inserted first, it
/// waits for an exclusive lock, where `INSERT IGNORE` takes a shared one that the `FOR UPDATE`
/// after it must upgrade, and two such upgrades (or one and a queued `UPDATE`) deadlock.
pub(crate) async fn lock_anchor(
    tx: &mut sqlx::MySqlConnection,
    select: &'static str,
    insert: &'static str,
    name: &str,
) -> Result<sqlx::mysql::MySqlRow, sqlx::Error> {
    if let Some(row) = sqlx::query(select)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?
    {
        return Ok(row);
    }
    sqlx::query(insert).bind(name).execute(&mut *tx).await?;
    sqlx::query(select).bind(name).fetch_one(&mut *tx).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_round_up_and_fences_follow_the_clock() {
        assert_eq!(ms_until(2_000_001, 1_000_000), 1001);
        assert_eq!(ms_until(1, 5), 0);
        assert_eq!(next_fence(10, 5), 11);
        assert_eq!(next_fence(10, 50), 50);
        assert_eq!(plus_ms(1_000, 2), 3_000);
    }
}
