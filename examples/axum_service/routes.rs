//! The handlers. `settle` is the one under the lock.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::{get, post};
use distlock::{Locker, distributed_lock};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::error::AppError;
use crate::ledger::Ledger;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) locker: Locker,
    pub(crate) ledger: Arc<Ledger>,
    /// How long settling works under the lock.
    pub(crate) work: Duration,
    pub(crate) prometheus: PrometheusHandle,
}

pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/orders/{id}/settle", post(settle))
        .route("/orders/{id}", get(show))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Settles order `id`: a read-modify-write with an await in between, correct only because one
/// request per order runs at a time, and fenced so that a holder that stalled past its lease
/// cannot overwrite a newer write. A request that waits more than 2 s for the order's lock gets
/// 409; a client that hangs up cancels the handler, and with it the lock is released. When the
/// service is told to stop (SIGTERM, Ctrl-C), a request still waiting or working gives up at
/// once (503, `Retry-After`) and releases the order's lock, so another replica takes the order
/// within a round trip instead of a lease later (`stop_on_shutdown`).
#[distributed_lock("order:{id}", locker = state.locker, wait = "2s", stop_on_shutdown)]
async fn settle(State(state): State<AppState>, Path(id): Path<u64>) -> Result<String, AppError> {
    let lease = distlock::current_lease().expect("inside a locked fn");
    let before = state.ledger.settled(id).await?;
    tokio::time::sleep(state.work).await;
    state
        .ledger
        .write(id, before + 1, lease.fencing_token())
        .await?;
    Ok(format!(
        "order {id}: settled {} times (fencing token {})\n",
        before + 1,
        lease.fencing_token()
    ))
}

async fn show(State(state): State<AppState>, Path(id): Path<u64>) -> Result<String, AppError> {
    Ok(format!(
        "order {id}: settled {} times\n",
        state.ledger.settled(id).await?
    ))
}

async fn metrics(State(state): State<AppState>) -> String {
    state.prometheus.render()
}
