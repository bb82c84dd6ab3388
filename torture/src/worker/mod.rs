//! One worker process: acquire → read the counter → hold → write the counter → fenced write,
//! twice with the same token (the fence accepts an equal token: one holder writes many times) →
//! release, again and again until the deadline, recording every step in its history. A shared
//! holder (a reader of a read-write lock, a semaphore permit holder) only holds: it writes
//! nothing, so its section is judged by the checker's overlap and permit counts alone. A
//! multi-lock holder (`multi`) does the exclusive section once, its fenced writes once per
//! name, each name's records naming it.
//!
//! The worker never re-checks its lease before writing: a holder that stalled (a `SIGSTOP`,
//! a partition that ate its renewals) writes anyway, as a process after a GC pause would.
//! Catching those writes is the fenced resource's job, and the checker counts how it did.

mod backend;
mod config;
mod multi;
mod renewals;

use std::error::Error;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use distlock::{Guard, LockError, Locker, TimeoutPhase};

pub use config::{Backend, Misbehave, WorkerConfig, Workload};

use crate::history::{Event, Held, HistoryWriter, nanos, now_ns, wall_ns};
use crate::resource::Resource;

/// Rounds a worker runs at most, whatever its deadline says.
const MAX_ROUNDS: u64 = 1_000_000;
/// The pause after a failed acquire (other than a wait that ran out), so that a worker facing
/// a dead Redis does not spin.
const ERROR_PAUSE: Duration = Duration::from_millis(20);

/// Runs a worker from the JSON config at `path` until its deadline.
///
/// # Errors
/// If the config cannot be read, the history cannot be created, the backend rejects its
/// configuration or the resource cannot be reached at start. Faults during the run are
/// recorded, not returned.
pub fn run_from_file(path: &Path) -> Result<(), Box<dyn Error>> {
    let config: WorkerConfig = serde_json::from_slice(&std::fs::read(path)?)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(config))
}

async fn run(config: WorkerConfig) -> Result<(), Box<dyn Error>> {
    let history = Arc::new(HistoryWriter::create(&config.history, Some(config.index))?);
    metrics::set_global_recorder(renewals::RenewalRecorder::new(Arc::clone(&history)))
        .map_err(|e| format!("installing the renewal recorder: {e}"))?;
    let (locker, etcd) = backend::locker(&config)?;
    let resource = Resource::connect(
        &config.resource_url,
        &config.fence_store,
        config.index,
        etcd,
    )
    .await?;
    history.record(Event::Started {
        pid: std::process::id(),
    });
    let mut worker = Worker {
        rng: fastrand::Rng::with_seed(config.seed),
        config,
        locker,
        resource,
        history,
    };
    worker.contend().await;
    worker.history.record(Event::Finished);
    Ok(())
}

/// Fenced writes per exclusive section, all with its token: the first and a repeat.
const WRITES_PER_SECTION: usize = 2;

/// A worker's connections and parameters.
struct Worker {
    config: WorkerConfig,
    locker: Locker,
    resource: Resource,
    history: Arc<HistoryWriter>,
    rng: fastrand::Rng,
}

impl Worker {
    /// Rounds until the deadline.
    async fn contend(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let left = Duration::from_millis(self.config.deadline_unix_ms)
                .saturating_sub(Duration::from_nanos(now_ns()));
            if left.is_zero() || self.config.stop_file.exists() {
                return;
            }
            let name = self.config.name();
            let name = name.as_str();
            let (request, held) = match self.config.workload {
                Workload::Multi { names } => {
                    self.multi_round(names, left).await;
                    continue;
                }
                Workload::Mutex => (self.locker.lock(name), Held::Exclusive),
                Workload::Fair => (self.locker.fair(name), Held::Exclusive),
                Workload::ReadWrite { write_percent } if self.rng.u32(0..100) < write_percent => {
                    (self.locker.write(name), Held::Exclusive)
                }
                Workload::ReadWrite { .. } => (self.locker.read(name), Held::Read),
                Workload::Semaphore { max } => {
                    (self.locker.semaphore(name, max), Held::Permit { max })
                }
            };
            let requested_ns = now_ns();
            let acquired = request.wait(self.config.wait().min(left)).acquire().await;
            match acquired {
                Ok(guard) => {
                    self.history.record(Event::Granted {
                        requested_ns,
                        token: guard.fencing_token(),
                        valid_until_ns: wall_ns(guard.valid_until()),
                        lease_ns: nanos(self.config.ttl()),
                        held,
                    });
                    if held == Held::Exclusive {
                        self.work(guard).await;
                    } else {
                        self.share(guard).await;
                    }
                }
                Err(error) => self.acquire_failed(requested_ns, &error).await,
            }
        }
    }

    /// Records a failed acquire, and pauses after one that did not merely wait out.
    async fn acquire_failed(&self, requested_ns: u64, error: &LockError) {
        self.history.record(Event::AcquireFailed {
            requested_ns,
            error: chain(error),
        });
        let waited_out = matches!(
            error,
            LockError::Timeout {
                phase: TimeoutPhase::Wait,
                ..
            }
        );
        if !waited_out {
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }

    /// The critical section: the counter's read-modify-write around a random hold, the fenced
    /// writes, and the release.
    async fn work(&mut self, guard: Guard) {
        self.increment(guard.fencing_token(), None).await;
        self.fenced_writes(&guard, None).await;
        self.release(guard).await;
    }

    /// The counter's read-modify-write around a random hold, under the lease of `token` (on
    /// `lock`, a multi-lock's name; `None`: the run's one lock).
    async fn increment(&mut self, token: u64, lock: Option<&str>) {
        let read_ns = now_ns();
        match self.resource.read_counter().await {
            Ok(read) => {
                tokio::time::sleep(self.hold()).await;
                match self.resource.write_counter(read + 1).await {
                    Ok(()) => self.note(
                        lock,
                        Event::Increment {
                            token,
                            read_ns,
                            read,
                        },
                    ),
                    Err(e) => self.error("counter write", &e),
                }
            }
            Err(e) => self.error("counter read", &e),
        }
    }

    /// The fenced writes under `guard`, which holds `lock` (a multi-lock's name; `None`: the
    /// run's one lock).
    async fn fenced_writes(&mut self, guard: &Guard, lock: Option<&str>) {
        let token = guard.fencing_token();
        for _ in 0..WRITES_PER_SECTION {
            let sent_ns = now_ns();
            let unfenced = self.config.misbehave == Misbehave::Unfenced;
            match self.resource.write(guard, lock, unfenced).await {
                Ok(accepted) => self.note(
                    lock,
                    Event::Write {
                        token,
                        sent_ns,
                        accepted,
                    },
                ),
                Err(e) => self.note(
                    lock,
                    Event::Error {
                        op: "fenced write".to_owned(),
                        message: e,
                        token: Some(token),
                    },
                ),
            }
        }
    }

    /// Records `event` about `lock` (`None`: the run's one lock, whose records name none).
    fn note(&self, lock: Option<&str>, event: Event) {
        match lock {
            Some(lock) => self.history.record_on(lock, event),
            None => self.history.record(event),
        }
    }

    /// A shared holder's section (a reader, a permit holder): it holds for a random time and
    /// writes nothing, then releases.
    async fn share(&mut self, guard: Guard) {
        tokio::time::sleep(self.hold()).await;
        self.release(guard).await;
    }

    /// A random hold, between the configured shortest and longest.
    fn hold(&mut self) -> Duration {
        Duration::from_millis(
            self.rng.u64(
                self.config.hold_min_ms..=self.config.hold_max_ms.max(self.config.hold_min_ms),
            ),
        )
    }

    /// Records the release's sending and its answer.
    async fn release(&self, guard: Guard) {
        let token = guard.fencing_token();
        self.history.record(Event::ReleaseSent {
            token,
            valid_until_ns: wall_ns(guard.valid_until()),
            held: guard.is_held(),
        });
        let outcome = release_outcome(guard.release().await);
        self.history.record(Event::Released { token, outcome });
    }

    fn error(&self, op: &str, message: &str) {
        self.history.record(Event::Error {
            op: op.to_owned(),
            message: message.to_owned(),
            token: None,
        });
    }
}

/// A release's answer as its record says it: `ours`, `not_ours` or the error.
fn release_outcome(released: Result<(), LockError>) -> String {
    match released {
        Ok(()) => "ours".to_owned(),
        Err(LockError::NotOwned { .. }) => "not_ours".to_owned(),
        Err(e) => format!("error: {}", chain(&e)),
    }
}

/// An error with its sources, `: `-separated: a Redlock quorum error says which nodes failed
/// only in its sources.
fn chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    for _ in 0..8 {
        let Some(e) = source else { break };
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}
