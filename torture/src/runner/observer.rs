//! Follows the workers' history files while they run, for the steps that react to what the
//! workers do (wait for a grant, wait for a successor's write).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::history::{Event, Record, Tail};

/// Every record the workers wrote so far, per worker.
#[derive(Debug)]
pub(crate) struct Observer {
    tails: Vec<Tail>,
    records: Vec<Vec<Record>>,
}

impl Observer {
    /// Follows `dir/worker-N.jsonl` for `workers` workers.
    pub(crate) fn new(dir: &Path, workers: u32) -> Observer {
        Observer {
            tails: (0..workers)
                .map(|i| Tail::new(dir.join(history_file(i))))
                .collect(),
            records: (0..workers).map(|_| Vec::new()).collect(),
        }
    }

    /// Reads what was appended since the last call.
    ///
    /// # Errors
    /// If a history file cannot be read or holds a line that does not parse.
    pub(crate) fn poll(&mut self) -> io::Result<()> {
        for (tail, records) in self.tails.iter_mut().zip(&mut self.records) {
            records.extend(tail.read_new()?);
        }
        Ok(())
    }

    /// How many records were read so far, per worker: a mark to search from.
    pub(crate) fn mark(&self) -> Vec<usize> {
        self.records.iter().map(Vec::len).collect()
    }

    /// Whether every worker has recorded its start.
    pub(crate) fn all_started(&self) -> bool {
        self.records
            .iter()
            .all(|r| r.iter().any(|r| matches!(r.event, Event::Started { .. })))
    }

    /// Polls the histories every `every` until a record after `mark` satisfies `pick` (which
    /// also extracts what the caller wants from it), for at most `within`.
    ///
    /// # Errors
    /// Reading a history failed, or nothing matched within `within` (`TimedOut`, saying
    /// `what`).
    pub(crate) fn wait_for<T>(
        &mut self,
        mark: &[usize],
        within: Duration,
        every: Duration,
        what: &str,
        pick: impl Fn(u32, &Record) -> Option<T>,
    ) -> io::Result<T> {
        let limit = Instant::now() + within;
        // Bounded in count as well as time: `every` is at least 1 ms.
        let rounds = within.as_millis() / every.as_millis().max(1) + 1;
        for _ in 0..rounds.min(1_000_000) {
            self.poll()?;
            let found = self
                .records
                .iter()
                .enumerate()
                .flat_map(|(w, records)| {
                    let from = mark.get(w).copied().unwrap_or(0).min(records.len());
                    records[from..].iter().map(move |r| (w, r))
                })
                .filter_map(|(w, r)| Some((r.at_ns, pick(u32::try_from(w).ok()?, r)?)))
                .min_by_key(|(at, _)| *at);
            if let Some((_, value)) = found {
                return Ok(value);
            }
            if Instant::now() > limit {
                break;
            }
            std::thread::sleep(every);
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no {what} within {within:?}"),
        ))
    }
}

/// The history file of worker `index`, inside the run's directory.
pub(crate) fn history_file(index: u32) -> String {
    format!("worker-{index}.jsonl")
}
