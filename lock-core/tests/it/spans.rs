//! The `acquire` spans, as a subscriber that wants them sees them: one per request, closed with
//! its outcome and attempts. (Without such a subscriber the request runs without entering a
//! span on each poll: what that saves is measured by `scripts/client-cost.sh`; this checks
//! that nothing is lost where a span is wanted.)

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{Locker, MemoryLock};
use tracing_subscriber::fmt::format::FmtSpan;

/// What the subscriber wrote, shared with the test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

#[test]
fn every_request_closes_its_span_with_its_outcome() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let locker = Locker::new(MemoryLock::new());
            let held = locker
                .lock("job")
                .try_acquire()
                .await
                .expect("no error")
                .expect("free");
            let busy = locker.lock("job").try_acquire().await.expect("no error");
            assert!(busy.is_none(), "held by the first");
            let waited = locker
                .lock("job")
                .wait(Duration::from_millis(50))
                .acquire()
                .await;
            assert!(waited.is_err(), "still held");
            held.release().await.expect("ours");
        });
    });
    let text = captured.text();
    let closed: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("acquire{") && line.contains("close"))
        .collect();
    assert_eq!(closed.len(), 3, "one closed span per request:\n{text}");
    for (line, outcome) in closed.iter().zip(["acquired", "busy", "timeout"]) {
        assert!(line.contains("name=job"), "{line}");
        assert!(
            line.contains(&format!("outcome=\"{outcome}\"")),
            "{outcome}: {line}"
        );
        assert!(line.contains("attempts="), "{line}");
    }
}
