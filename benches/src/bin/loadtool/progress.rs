//! The progress bar: one bar over the planned time of the whole run, advanced smoothly within
//! each step by a ticker thread. When stderr is not a terminal (indicatif then hides the bar),
//! one plain line per step instead.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the bar moves.
const TICK: Duration = Duration::from_millis(100);

struct Step {
    /// Planned milliseconds of the steps before this one.
    base_ms: u64,
    /// Planned milliseconds of this step.
    budget_ms: u64,
    started: Instant,
}

/// The live display of a run.
pub(crate) struct Progress {
    bar: ProgressBar,
    step: Arc<Mutex<Step>>,
    plan: std::vec::IntoIter<(String, Duration)>,
    number: usize,
    steps: usize,
    started: Instant,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// A display for a run of `steps`: labels and planned times, in the order they run.
    pub(crate) fn new(steps: Vec<(String, Duration)>) -> Self {
        let planned: Duration = steps.iter().map(|s| s.1).sum();
        let total = millis(planned).max(1);
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{wide_bar}] {percent:>3}% {prefix} {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
        let step = Arc::new(Mutex::new(Step {
            base_ms: 0,
            budget_ms: 0,
            started: Instant::now(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = (!bar.is_hidden()).then(|| {
            let (bar, step, stop) = (bar.clone(), Arc::clone(&step), Arc::clone(&stop));
            std::thread::spawn(move || {
                // Bounded: stops with the display, and in any case after a day.
                for _ in 0..(86_400_000 / millis(TICK)) {
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    {
                        let s = step.lock().unwrap_or_else(PoisonError::into_inner);
                        let within = millis(s.started.elapsed()).min(s.budget_ms * 99 / 100);
                        bar.set_position((s.base_ms + within).min(total));
                    }
                    std::thread::sleep(TICK);
                }
            })
        });
        Self {
            bar,
            step,
            number: 0,
            steps: steps.len(),
            plan: steps.into_iter(),
            started: Instant::now(),
            stop,
            ticker,
        }
    }

    /// Starts the next step of the plan.
    pub(crate) fn next(&mut self) {
        if let Some((label, budget)) = self.plan.next() {
            self.step(&label, budget);
        }
    }

    fn step(&mut self, label: &str, budget: Duration) {
        self.number += 1;
        {
            let mut s = self.step.lock().unwrap_or_else(PoisonError::into_inner);
            s.base_ms += s.budget_ms;
            s.budget_ms = millis(budget);
            s.started = Instant::now();
        }
        let prefix = format!("{}/{}", self.number, self.steps);
        if self.bar.is_hidden() {
            eprintln!(
                "[{:>6.1} s] ({prefix}) {label} (~{:.1} s)",
                self.started.elapsed().as_secs_f64(),
                budget.as_secs_f64()
            );
        } else {
            self.bar.set_prefix(prefix);
            self.bar.set_message(label.to_owned());
        }
    }

    /// Prints a line above the bar.
    pub(crate) fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.suspend(|| eprintln!("{line}"));
        }
    }

    /// Removes the bar.
    pub(crate) fn finish(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(ticker) = self.ticker.take() {
            let _ = ticker.join();
        }
        self.bar.finish_and_clear();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
