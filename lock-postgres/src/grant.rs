//! The statements that may grant a lease (acquire, hand-over), run so that a grant outlives its
//! caller: a lease granted to a caller that is gone (dropped, or timed out before the answer)
//! is released, after the grant, never before it. The same holds for what a busy attempt
//! records (a waiting writer, a fair waiter's place in the queue): it is withdrawn after the
//! statement that recorded it, never before.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use lock_core::backend::Detached;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_postgres::Row;
use tokio_postgres::types::{ToSql, Type};

use crate::error::{BACKEND, timeout};
use crate::pool::{cancel_query, client};
use crate::statements::{Statements, from_statement, lost_prepared, run};

/// Owned, typed statement parameters: what a statement needs to run in a task of its own.
pub(crate) type Params = Vec<(Box<dyn ToSql + Send + Sync>, Type)>;

/// One owned, typed parameter.
pub(crate) fn param(
    value: impl ToSql + Send + Sync + 'static,
    ty: Type,
) -> (Box<dyn ToSql + Send + Sync>, Type) {
    (Box::new(value), ty)
}

/// `params` as the statement runner takes them.
pub(crate) fn borrowed(params: &Params) -> Vec<(&(dyn ToSql + Sync), Type)> {
    params
        .iter()
        .map(|(value, ty)| (&**value as &(dyn ToSql + Sync), ty.clone()))
        .collect()
}

/// A statement that may grant a lease (acquire of any kind, hand-over), with what it needs to
/// run on its own: owned parameters, how to tell from its rows whether it left something behind,
/// and the statement that gives that back.
pub(crate) struct GrantStatement {
    pub(crate) op: Op,
    pub(crate) sql: &'static str,
    pub(crate) params: Params,
    /// Whether the rows say the statement left something its caller must give back: a lease
    /// granted or, for a kind that records its waiters ([`Kind::records_waiter`]), the record
    /// of a busy attempt.
    ///
    /// [`Kind::records_waiter`]: lock_core::Kind::records_waiter
    pub(crate) left_behind: fn(&[Row]) -> bool,
    /// The lock name, for the logs.
    pub(crate) name: String,
    /// Releases the lease it grants (the release of its kind), if nobody takes it.
    pub(crate) undo: (&'static str, Params),
}

/// Limits a grant task works within.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) connect: Duration,
    pub(crate) statement: Duration,
    pub(crate) statements: Statements,
}

/// Runs a grant and waits for its answer. The grant's work outlives a caller that is dropped
/// or times out: it runs in the caller's task while the caller waits (no task spawned on the
/// way of every acquire), and what is left of it when the caller stops waiting (a dropped
/// caller, or a late answer after a timeout) goes on in a task of its own ([`Detached`]). When
/// the statement grants a lease that nobody will receive, that work releases it once the grant
/// has answered, so the release can never overtake the grant (as a release sent at once on
/// another connection could: the server may run it first, find nothing, and then run the
/// grant).
pub(crate) async fn run_grant(
    pool: Pool,
    limits: Limits,
    grant: GrantStatement,
) -> Result<Vec<Row>, LockError> {
    let op = grant.op;
    let (answer, mut answered) = oneshot::channel();
    let mut work = Detached::future(grant_task(pool, limits, grant, answer));
    let got = tokio::select! {
        biased;
        got = &mut answered => got,
        () = &mut work => (&mut answered).await,
    };
    drop(work); // unfinished (after a timeout): it goes on in a task of its own
    got.unwrap_or_else(|_| {
        Err(LockError::Backend {
            backend: BACKEND,
            op,
            retryable: true,
            source: "the statement's work ended without an answer".into(),
        })
    })
}

type Answer = oneshot::Sender<Result<Vec<Row>, LockError>>;

async fn grant_task(pool: Pool, limits: Limits, grant: GrantStatement, answer: Answer) {
    let client = match client(&pool, limits.connect).await {
        Ok(client) => client,
        Err(error) => {
            let _ = answer.send(Err(error));
            return;
        }
    };
    if answer.is_closed() {
        return; // the caller is gone before anything was sent
    }
    let started = Instant::now();
    let params = borrowed(&grant.params);
    let mut query = Box::pin(run(&client, limits.statements, grant.sql, &params));
    let rows = match tokio::time::timeout(limits.statement, &mut query).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(err)) => {
            let unusable = err.is_closed() || lost_prepared(limits.statements, &err);
            let _ = answer.send(Err(from_statement(limits.statements, err, grant.op)));
            drop(query);
            if unusable {
                drop(Object::take(client));
            }
            return;
        }
        Err(_) => {
            let _ = answer.send(Err(timeout(TimeoutPhase::Command, started.elapsed())));
            // The statement may still grant: ask the server to cancel it, and wait (bounded)
            // for its answer so a late grant is released here.
            cancel_query(client.cancel_token(), limits.connect);
            let late = tokio::time::timeout(limits.connect + limits.statement, &mut query).await;
            drop(query);
            match late {
                Ok(Ok(rows)) => {
                    drop(client); // answered: back to the pool, in a known state
                    if (grant.left_behind)(&rows) {
                        release_orphan(&pool, limits, &grant).await;
                    }
                }
                Ok(Err(_)) => {}
                Err(_) => {
                    // Still no answer: give the connection up; the lease, if granted, ends at
                    // its TTL.
                    drop(Object::take(client));
                }
            }
            return;
        }
    };
    // Back to the pool before the caller hears of it, so its next operation finds it there.
    drop(query);
    drop(client);
    if let Err(Ok(rows)) = answer.send(Ok(rows))
        && (grant.left_behind)(&rows)
    {
        release_orphan(&pool, limits, &grant).await;
    }
}

/// Releases a lease granted to a caller that is gone, or withdraws the waiter's record its busy
/// attempt left. The statement has been answered, so it is committed: any connection will do.
async fn release_orphan(pool: &Pool, limits: Limits, grant: &GrantStatement) {
    let Ok(Ok(client)) = tokio::time::timeout(limits.connect, pool.get()).await else {
        tracing::warn!(
            name = grant.name,
            "no connection to release the grant of a cancelled acquire; it ends at its TTL"
        );
        return;
    };
    let (sql, params) = &grant.undo;
    let params = borrowed(params);
    let released = tokio::time::timeout(
        limits.statement,
        run(&client, limits.statements, sql, &params),
    )
    .await;
    match released {
        Ok(Ok(_)) => tracing::debug!(
            name = grant.name,
            "released the grant of a cancelled or timed-out acquire"
        ),
        Ok(Err(error)) => tracing::warn!(
            name = grant.name,
            %error,
            "releasing the grant of a cancelled acquire failed; it ends at its TTL"
        ),
        Err(_) => tracing::warn!(
            name = grant.name,
            "releasing the grant of a cancelled acquire timed out; it ends at its TTL"
        ),
    }
}
