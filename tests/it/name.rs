//! `name = ".."`: the metrics label; by default the template, never the rendered name (whose
//! number of values would be unbounded).

use distlock::metrics as metric;
use distlock::{LockError, Locker, distributed_lock};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

use crate::common::Backend;

#[distributed_lock("order:{id}", locker = locker)]
async fn default_label(locker: &Locker, id: u32) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:{id}", locker = locker, name = "settle-order")]
async fn named(locker: &Locker, id: u32) -> Result<(), LockError> {
    Ok(())
}

/// `distlock_acquired_total` per `lock` label.
fn acquired_by_label(recorder: &DebuggingRecorder) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == metric::ACQUIRED_TOTAL)
        .map(|(key, _, _, value)| {
            let label = key
                .key()
                .labels()
                .find(|l| l.key() == "lock")
                .map(|l| l.value().to_owned())
                .expect("a lock label");
            let DebugValue::Counter(n) = value else {
                panic!("not a counter")
            };
            (label, n)
        })
        .collect();
    found.sort();
    found
}

#[test]
fn the_label_is_the_template_or_the_name() {
    for backend in ["memory", "redis"] {
        let recorder = DebuggingRecorder::new();
        metrics::with_local_recorder(&recorder, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let backend = match backend {
                    "memory" => Backend::memory(),
                    _ => Backend::redis(),
                };
                for id in 0..3 {
                    default_label(&backend.locker, id).await.expect("free");
                }
                named(&backend.locker, 7).await.expect("free");
            });
        });
        assert_eq!(
            acquired_by_label(&recorder),
            [("order:{id}".to_owned(), 3), ("settle-order".to_owned(), 1)],
            "{backend}"
        );
    }
}
