//! What this process costs, read from `/proc/self`: CPU time and resident memory. Plus a few
//! facts about the machine for the record of the run.

use std::fs;
use std::time::Duration;

use serde::Serialize;

/// Linux reports process CPU times in `/proc` in units of `USER_HZ`, which is 100 on every
/// architecture Linux supports (it is part of the ABI, whatever the kernel's own tick rate).
const USER_HZ: u64 = 100;

/// CPU time (user + system, all threads) this process has used so far; zero where `/proc` is
/// not available. Resolution: 10 ms.
pub(crate) fn cpu_time() -> Duration {
    fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| parse_cpu_ticks(&stat))
        .map_or(Duration::ZERO, |ticks| {
            Duration::from_millis(ticks * 1000 / USER_HZ)
        })
}

/// The `/proc` directory and `stat` of process `pid` and of each of its children alive now
/// (a PostgreSQL server: the postmaster and its backends); nothing where `/proc` is not
/// available.
fn tree(pid: u32) -> impl Iterator<Item = (std::path::PathBuf, String)> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(move |e| {
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            let (own, parent) = (parse_pid(&stat)?, parse_parent(&stat)?);
            (own == pid || parent == pid).then(|| (e.path(), stat))
        })
}

/// CPU time (user + system) of process `pid` and of its children alive now (a PostgreSQL
/// server: the postmaster and its backends), in seconds; zero where `/proc` is not available.
/// A backend that exited takes its time with it, so sum over connections that stay open.
pub(crate) fn tree_cpu_seconds(pid: u32) -> f64 {
    let ticks: u64 = tree(pid)
        .filter_map(|(_, stat)| parse_cpu_ticks(&stat))
        .sum();
    ticks as f64 / USER_HZ as f64
}

/// Proportional resident memory (`Pss` of `/proc/<pid>/smaps_rollup`) of process `pid` and
/// of its children alive now, in MiB; zero where `/proc` is not available. Pss splits each
/// shared page among the processes mapping it, so a PostgreSQL server's shared buffers are
/// counted once, not once per backend as a sum of their RSS would.
pub(crate) fn tree_pss_mib(pid: u32) -> f64 {
    let kib: f64 = tree(pid)
        .filter_map(|(dir, _)| fs::read_to_string(dir.join("smaps_rollup")).ok())
        .map(|rollup| parse_kib(&rollup, "Pss:"))
        .sum();
    kib / 1024.0
}

/// The value in kB of the line starting with `field` (`VmRSS:`, `Pss:`); 0 if absent.
fn parse_kib(text: &str, field: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0)
}

/// The pid (field 1) from the text of `/proc/<pid>/stat`.
fn parse_pid(stat: &str) -> Option<u32> {
    stat.split_whitespace().next()?.parse().ok()
}

/// The parent's pid (field 4) from the text of `/proc/<pid>/stat`.
fn parse_parent(stat: &str) -> Option<u32> {
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// utime + stime from the text of `/proc/<pid>/stat`, in ticks.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may contain spaces: split after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name, field 3 (state) is index 0; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory of this process, in MiB.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub(crate) struct Memory {
    /// Resident set size (`VmRSS`).
    pub(crate) rss_mib: f64,
    /// Its anonymous part (`RssAnon`): the heap and stacks, without the mapped binary.
    pub(crate) anon_mib: f64,
    /// The peak resident set size so far (`VmHWM`).
    pub(crate) peak_mib: f64,
}

/// This process's memory now; zeros where `/proc` is not available.
pub(crate) fn memory() -> Memory {
    fs::read_to_string("/proc/self/status")
        .map(|status| parse_memory(&status))
        .unwrap_or_default()
}

fn parse_memory(status: &str) -> Memory {
    let kib = |field: &str| parse_kib(status, field);
    Memory {
        rss_mib: kib("VmRSS:") / 1024.0,
        anon_mib: kib("RssAnon:") / 1024.0,
        peak_mib: kib("VmHWM:") / 1024.0,
    }
}

/// The machine a run was made on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) kernel: String,
    pub(crate) memory_gib: f64,
}

impl Machine {
    pub(crate) fn detect() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_gib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
        Self {
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model,
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_else(|_| "unknown".to_owned()),
            memory_gib,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat = "1234 (load tool (x)) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0 100";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!((parse_pid(stat), parse_parent(stat)), (Some(1234), Some(1)));
    }

    #[test]
    fn parses_status() {
        let status =
            "Name:\tloadtool\nVmHWM:\t  20480 kB\nVmRSS:\t  10240 kB\nRssAnon:\t   5120 kB\n";
        let m = parse_memory(status);
        assert!((m.rss_mib - 10.0).abs() < 1e-9);
        assert!((m.anon_mib - 5.0).abs() < 1e-9);
        assert!((m.peak_mib - 20.0).abs() < 1e-9);
    }

    #[test]
    fn reads_this_process() {
        assert!(memory().rss_mib > 0.0);
        let _ = cpu_time();
        assert!(Machine::detect().cpus >= 1);
    }
}
