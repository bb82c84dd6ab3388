//! Follows the workers' history files while they run, for the steps that react to what the
//! workers do (wait for a grant, wait for a successor's write).

use std::io;
use std::path::Path;

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

    /// The first record after `mark` (per worker) that satisfies `pred`, with its worker.
    pub(crate) fn find_since(
        &self,
        mark: &[usize],
        pred: impl Fn(&Record) -> bool,
    ) -> Option<(u32, &Record)> {
        self.records
            .iter()
            .enumerate()
            .flat_map(|(w, records)| {
                let from = mark.get(w).copied().unwrap_or(0).min(records.len());
                records[from..].iter().map(move |r| (w, r))
            })
            .filter(|(_, r)| pred(r))
            .min_by_key(|(_, r)| r.at_ns)
            .and_then(|(w, r)| Some((u32::try_from(w).ok()?, r)))
    }
}

/// The history file of worker `index`, inside the run's directory.
pub(crate) fn history_file(index: u32) -> String {
    format!("worker-{index}.jsonl")
}
