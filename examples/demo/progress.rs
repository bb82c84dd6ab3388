//! The live display: a clock bar and one spinner per worker on a terminal; when stdout is not
//! a terminal (indicatif then hides itself), one plain line per second instead.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::slot::Slot;
use crate::stats::{ms_or_dash, percentile};

/// How often spinners turn.
const SPIN: Duration = Duration::from_millis(120);

/// How often the plain display prints a line.
const PLAIN_EVERY: Duration = Duration::from_secs(1);

/// The live display of a run.
#[derive(Debug)]
pub(crate) struct Progress {
    /// Draws on stdout; hidden when stdout is not a terminal.
    multi: MultiProgress,
    /// Time elapsed against the run's duration.
    clock: ProgressBar,
    /// One spinner per worker.
    bars: Vec<ProgressBar>,
    /// When the workers started.
    started: Instant,
    /// How long they run.
    duration: Duration,
    /// When the plain display prints its next line.
    next_line: Instant,
}

impl Progress {
    /// A display for workers labelled `labels`, started at `started` for `duration`.
    pub(crate) fn new(labels: &[String], started: Instant, duration: Duration) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let clock = multi.add(
            ProgressBar::new(millis(duration))
                .with_style(style("{prefix:>9} [{wide_bar}] {msg}"))
                .with_prefix("time"),
        );
        let bars = labels
            .iter()
            .map(|label| {
                let bar = multi.add(
                    ProgressBar::new_spinner()
                        .with_style(style("{prefix:>9} {spinner} {wide_msg}"))
                        .with_prefix(label.clone()),
                );
                bar.enable_steady_tick(SPIN);
                bar
            })
            .collect();
        Self {
            multi,
            clock,
            bars,
            started,
            duration,
            next_line: started + PLAIN_EVERY,
        }
    }

    /// Whether the bars are drawn (stdout is a terminal).
    fn drawn(&self) -> bool {
        !self.multi.is_hidden()
    }

    /// Shows the workers' latest state.
    pub(crate) fn update(&mut self, slots: &[Slot]) {
        let elapsed = self.started.elapsed();
        if !self.drawn() {
            self.plain_line(slots, elapsed);
            return;
        }
        self.clock.set_position(millis(elapsed.min(self.duration)));
        self.clock.set_message(if elapsed < self.duration {
            format!(
                "{:.1} s / {} s",
                elapsed.as_secs_f64(),
                self.duration.as_secs()
            )
        } else {
            "time is up, finishing".to_owned()
        });
        for (bar, slot) in self.bars.iter().zip(slots) {
            if bar.is_finished() {
                continue;
            }
            let line = describe(slot);
            if slot.exited() {
                let end = match slot.failure() {
                    Some(why) => format!("FAILED ({why}): {line}"),
                    None => format!("done: {line}"),
                };
                bar.finish_with_message(end);
            } else {
                bar.set_message(line);
            }
        }
    }

    /// Once a second, a line with every worker's acquisitions so far.
    fn plain_line(&mut self, slots: &[Slot], elapsed: Duration) {
        if Instant::now() < self.next_line {
            return;
        }
        self.next_line += PLAIN_EVERY;
        let counts: Vec<String> = slots
            .iter()
            .map(|s| s.live.acquisitions.to_string())
            .collect();
        let total: u64 = slots.iter().map(|s| s.live.acquisitions).sum();
        let rejected: u64 = slots.iter().map(|s| s.live.stale_rejected).sum();
        let running = slots.iter().filter(|s| !s.exited()).count();
        println!(
            "[{:>5.1} s] acquisitions per worker: {} (total {total}); stale writes rejected: \
             {rejected}; workers running: {running}",
            elapsed.as_secs_f64(),
            counts.join(" ")
        );
    }

    /// Prints a line (a worker's error, say) on stderr without garbling the bars.
    pub(crate) fn note(&self, line: &str) {
        if self.drawn() {
            self.multi.suspend(|| eprintln!("{line}"));
        } else {
            eprintln!("{line}");
        }
    }

    /// Removes the display, leaving the terminal to the report.
    pub(crate) fn finish(&self) {
        for bar in &self.bars {
            bar.finish_and_clear();
        }
        self.clock.finish_and_clear();
        // Best effort: a terminal that went away is no reason to fail the run.
        let _ = self.multi.clear();
    }
}

/// One worker's progress in words.
fn describe(slot: &Slot) -> String {
    let live = &slot.live;
    let mut line = format!(
        "{} acquisitions · wait p50 {} ms · {} stalls, {} stale writes rejected",
        live.acquisitions,
        ms_or_dash(percentile(&slot.waits_us, 50)),
        live.stalls,
        live.stale_rejected,
    );
    for (count, what) in [
        (live.wait_timeouts, "wait timeouts"),
        (live.errors, "errors"),
        (live.violations, "EXCLUSION VIOLATIONS"),
        (live.stale_accepted, "STALE WRITES ACCEPTED"),
    ] {
        if count > 0 {
            let _ = write!(line, " · {count} {what}");
        }
    }
    line
}

/// A style from `template`; the templates here are fixed and valid, but fall back to the
/// default look rather than panic.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

/// A duration in whole milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
