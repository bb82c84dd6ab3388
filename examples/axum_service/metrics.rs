//! The Prometheus recorder behind `/metrics`, with distlock's histogram buckets for the lock's
//! timings (so dashboards can use `histogram_quantile` over `_bucket` series; without buckets
//! the exporter renders summaries).

use std::time::Duration;

use distlock::metrics as metric;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Installs the global recorder and starts its upkeep (which bounds histogram memory).
///
/// `metric::install` compiles only for a recorder built on the `metrics` version distlock
/// records through (0.24), and describes the series (their `# HELP` lines).
pub(crate) fn install() -> Result<PrometheusHandle, crate::Error> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Prefix(metric::PREFIX.into()), metric::BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metric::install(recorder).map_err(|_| "a metrics recorder was installed already")?;
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(5));
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}
