//! Connections from the pool, shared by both modes: getting one within the connect timeout, and
//! throwing away one whose statement timed out.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use lock_core::{LockError, TimeoutPhase};
use tokio::time::Instant;
use tokio_postgres::{CancelToken, NoTls};

use crate::error::{from_pool, timeout};

/// A pooled connection, within `connect_timeout`.
pub(crate) async fn client(pool: &Pool, connect_timeout: Duration) -> Result<Object, LockError> {
    let started = Instant::now();
    match tokio::time::timeout(connect_timeout, pool.get()).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(err)) => Err(from_pool(err, started.elapsed())),
        Err(_) => Err(timeout(TimeoutPhase::Connect, started.elapsed())),
    }
}

/// Throws away a connection whose statement timed out (its state is unknown) and asks the
/// server, in the background and bounded by `limit`, to cancel what it still runs.
pub(crate) fn discard(client: Object, limit: Duration) {
    let cancel = client.cancel_token();
    drop(Object::take(client));
    cancel_query(cancel, limit);
}

/// Asks the server, in the background and bounded by `limit`, to cancel the statement its
/// session runs (a request on a connection of its own).
pub(crate) fn cancel_query(cancel: CancelToken, limit: Duration) {
    drop(tokio::spawn(async move {
        let _ = tokio::time::timeout(limit, cancel.cancel_query(NoTls)).await;
    }));
}
