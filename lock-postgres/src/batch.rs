//! Renewing many leases at once: one statement per table that holds some of them.

use std::collections::HashSet;
use std::time::Duration;

use lock_core::{Lease, LockError, Op, check_ttl, valid_until};
use tokio::time::Instant;
use tokio_postgres::types::Type;

use crate::error::BACKEND;
use crate::executor::{Executor, millis};
use crate::sql::LeaseTable;

/// The leases of one table to extend, as the statement's three arrays.
#[derive(Default)]
struct Batch {
    names: Vec<String>,
    tokens: Vec<String>,
    ttls: Vec<i64>,
}

/// What one table's statement answered: the (name, token) of each lease it extended, or the
/// failure as its text and whether trying again may succeed (`LockError` is not `Clone`: each
/// lease gets an error of its own saying the same).
type Extended = Result<HashSet<(String, String)>, (String, bool)>;

/// [`Lock::extend_many`](lock_core::backend::Lock::extend_many) for `PostgresLock`: the
/// statements of the tables concerned run at once (each on a pooled connection of its own).
pub(crate) async fn extend_many(
    exec: &Executor,
    leases: &[(Lease, Duration)],
) -> Vec<Result<Option<Instant>, LockError>> {
    let checked: Vec<Result<u64, LockError>> =
        leases.iter().map(|(_, ttl)| check_ttl(*ttl)).collect();
    let mut batches: [Batch; 4] = Default::default();
    for ((lease, _), ttl_ms) in leases.iter().zip(&checked) {
        if let Ok(ttl_ms) = ttl_ms {
            let batch = &mut batches[index(LeaseTable::of(lease.kind()))];
            batch.names.push(lease.name().to_owned());
            batch
                .tokens
                .push(lease.token().to_hex().as_str().to_owned());
            batch.ttls.push(millis(*ttl_ms));
        }
    }
    let started = Instant::now();
    let answers: Vec<Extended> = futures::future::join_all(
        LeaseTable::ALL
            .iter()
            .zip(&batches)
            .map(|(table, batch)| extend_table(exec, *table, batch)),
    )
    .await;
    leases
        .iter()
        .zip(checked)
        .map(|((lease, _), ttl_ms)| {
            let ttl_ms = ttl_ms?;
            match &answers[index(LeaseTable::of(lease.kind()))] {
                Ok(extended) => {
                    let key = (
                        lease.name().to_owned(),
                        lease.token().to_hex().as_str().to_owned(),
                    );
                    Ok(extended
                        .contains(&key)
                        .then(|| valid_until(started, Duration::from_millis(ttl_ms))))
                }
                Err((reason, retryable)) => Err(LockError::Backend {
                    backend: BACKEND,
                    op: Op::Extend,
                    retryable: *retryable,
                    source: format!("extending a batch of leases failed: {reason}").into(),
                }),
            }
        })
        .collect()
}

/// Where `table`'s batch is kept.
fn index(table: LeaseTable) -> usize {
    LeaseTable::ALL
        .iter()
        .position(|t| *t == table)
        .unwrap_or_default()
}

/// One table's statement; nothing is sent for an empty batch.
async fn extend_table(exec: &Executor, table: LeaseTable, batch: &Batch) -> Extended {
    if batch.names.is_empty() {
        return Ok(HashSet::new());
    }
    let answer = exec
        .query(
            Op::Extend,
            table.extend_many(),
            &[
                (&batch.names, Type::TEXT_ARRAY),
                (&batch.tokens, Type::TEXT_ARRAY),
                (&batch.ttls, Type::INT8_ARRAY),
            ],
        )
        .await;
    match answer {
        Ok(rows) => rows
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| (e.to_string(), false)),
        Err(error) => Err((error.to_string(), error.is_retryable())),
    }
}
