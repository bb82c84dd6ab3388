//! The campaign loop most users want: [`Election::run`].

use std::fmt;
use std::future::Future;
use std::time::Duration;

use std::sync::Arc;

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use super::Election;
use crate::LeaseWatch;

/// After a campaign fails (the backend unreachable for longer than the locker's
/// `retry_errors_for`), the next starts this long after.
const CAMPAIGN_RETRY: Duration = Duration::from_secs(1);

/// What [`Election::run`] reports about its terms, in order, through
/// [`ElectionRun::next_event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TermEvent {
    /// This process was elected: the work starts with this term.
    Started {
        /// The term (the fencing token of the grant).
        term: u64,
    },
    /// The term ended, and why; its work is no longer running.
    Ended {
        /// The term that ended.
        term: u64,
        /// Why it ended.
        end: TermEnd,
    },
    /// A campaign or a resignation failed; the loop goes on (a campaign is retried after 1 s).
    Failed {
        /// The error, as text.
        error: String,
    },
}

/// Why a term of [`Election::run`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TermEnd {
    /// The leadership was lost (its stop point passed, or the lock was found taken): the
    /// work was cancelled, while the lease was still valid for the stop margin where renewals
    /// failed. The loop campaigns again.
    Lost,
    /// The work returned: the leadership was resigned, and the loop campaigns again.
    Finished,
    /// The run was stopped: the work was cancelled and the leadership resigned.
    Stopped,
}

/// The handle of a running [`Election::run`]: its term events, and the way to stop it.
/// Dropping it stops the run too (the work is cancelled and the leadership given back, in
/// the background).
#[must_use = "dropping the handle stops the run"]
pub struct ElectionRun {
    /// Told once to stop the run: by [`ElectionRun::stop`], a signal tied with
    /// [`ElectionRun::stop_on`], or the handle's drop. `notify_one` keeps the stop for a loop
    /// that is not waiting yet.
    stop: Arc<Notify>,
    events: mpsc::UnboundedReceiver<TermEvent>,
    task: Option<JoinHandle<()>>,
    /// The task that waits for a tied stop signal, ended with the handle.
    signal: Option<JoinHandle<()>>,
}

impl Election {
    /// Campaigns, runs `work` while leading, cancels it when the leadership is lost, and
    /// campaigns again, until the returned handle is stopped or dropped. `work` is called
    /// once per term with a [`LeaseWatch`] of the term's lease (its `fencing_token()` is the
    /// term, for the resource). Work that returns ends its term (the leadership is resigned)
    /// and the loop campaigns again.
    ///
    /// Each term's start and end come out of [`ElectionRun::next_event`] in order. The
    /// events are kept until read (two per term).
    ///
    /// # Panics
    /// Outside a tokio runtime: the loop is a task on the current runtime.
    pub fn run<F, Fut>(&self, mut work: F) -> ElectionRun
    where
        F: FnMut(LeaseWatch) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = Arc::new(Notify::new());
        let (events, receiver) = mpsc::unbounded_channel();
        let election = self.clone();
        let told = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let stopped = told.notified();
            tokio::pin!(stopped);
            loop {
                let campaign = tokio::select! {
                    biased;
                    _ = &mut stopped => return,
                    campaign = election.campaign() => campaign,
                };
                let leadership = match campaign {
                    Ok(leadership) => leadership,
                    Err(error) => {
                        let _ = events.send(TermEvent::Failed {
                            error: error.to_string(),
                        });
                        tokio::select! {
                            biased;
                            _ = &mut stopped => return,
                            () = tokio::time::sleep(CAMPAIGN_RETRY) => continue,
                        }
                    }
                };
                let term = leadership.term();
                let _ = events.send(TermEvent::Started { term });
                let end = {
                    let lost = leadership.lost();
                    let work = work(leadership.lease_watch());
                    tokio::select! {
                        biased;
                        _ = &mut stopped => TermEnd::Stopped,
                        () = lost => TermEnd::Lost,
                        () = work => TermEnd::Finished,
                    }
                    // The work is dropped here, before the resignation is sent.
                };
                if end == TermEnd::Lost {
                    drop(leadership);
                } else if let Err(error) = leadership.resign().await {
                    let _ = events.send(TermEvent::Failed {
                        error: error.to_string(),
                    });
                }
                let _ = events.send(TermEvent::Ended { term, end });
                if end == TermEnd::Stopped {
                    return;
                }
            }
        });
        ElectionRun {
            stop,
            events: receiver,
            task: Some(task),
            signal: None,
        }
    }
}

impl ElectionRun {
    /// The next term event, waiting for it; `None` once the run has ended and every event was
    /// read.
    ///
    /// # Cancel safety
    /// Cancel safe: an event not yet returned stays for the next call.
    pub async fn next_event(&mut self) -> Option<TermEvent> {
        self.events.recv().await
    }

    /// Stops the run: cancels the work of a current term, resigns, and waits until that is
    /// done. The events up to the end stay readable.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the run still stops (in the background).
    pub async fn stop(&mut self) {
        self.stop.notify_one();
        self.wait().await;
    }

    /// Ties the run to a stop signal, such as the process's [`shutdown`](crate::shutdown)
    /// (client-go's `ReleaseOnCancel`): when `signal` resolves, the run stops as with
    /// [`stop`](ElectionRun::stop) — the current term's work is cancelled and the leadership
    /// **resigned at once**, so another candidate is elected within a round trip or two
    /// instead of a lease later. Await [`wait`](ElectionRun::wait) to let the resignation
    /// finish before the process exits:
    ///
    /// ```no_run
    /// # async fn serve(locker: lock_core::Locker) {
    /// locker
    ///     .elect("scheduler")
    ///     .run(|term| async move { /* lead with term.fencing_token() */ })
    ///     .stop_on(lock_core::shutdown())
    ///     .wait()
    ///     .await; // returns after SIGTERM or Ctrl-C, the term given up
    /// # }
    /// ```
    ///
    /// # Panics
    /// Outside a tokio runtime: the signal is awaited by a task on the current runtime.
    pub fn stop_on(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        let stop = Arc::clone(&self.stop);
        if let Some(earlier) = self.signal.replace(tokio::spawn(async move {
            signal.await;
            stop.notify_one();
        })) {
            earlier.abort();
        }
        self
    }

    /// Waits until the run has ended: stopped ([`stop`](ElectionRun::stop), a signal tied
    /// with [`stop_on`](ElectionRun::stop_on)) and its term given up, or its task panicked in
    /// the user's work. The events up to the end stay readable.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, the run goes on (or stops, as it was told).
    pub async fn wait(&mut self) {
        if let Some(task) = self.task.as_mut() {
            // A panic of the user's work ends the task; there is nothing more to wait for.
            let _ = task.await;
            self.task = None;
        }
    }

    /// Whether the run has ended (stopped, or its task panicked in the user's work).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for ElectionRun {
    /// Stops the run in the background (its task sees the stop, cancels the work and resigns).
    fn drop(&mut self) {
        self.stop.notify_one();
        if let Some(signal) = self.signal.take() {
            signal.abort();
        }
    }
}

impl fmt::Debug for ElectionRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElectionRun")
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}
