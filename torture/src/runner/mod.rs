//! Runs one scenario: starts the lab and the worker processes, plays the fault cycle while
//! they work, stops them, and hands the merged history to the checker.

mod observer;
mod workers;

use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::checker::{self, History, Report};
use crate::history::{Event, HistoryWriter, now_ns, read_file};
use crate::lab::{Lab, Server};
use crate::resource;
use crate::scenario::Scenario;
use crate::schedule::{Effect, Net, Step, Target};
use crate::worker::{Misbehave, WorkerConfig};

use observer::{Observer, history_file};
use workers::Workers;

/// The file, beside the histories, that holds the resource's final state.
pub const RESOURCE_FILE: &str = "resource.json";
/// The runner's own history: the faults, when they started and healed.
pub const FAULTS_FILE: &str = "faults.jsonl";

/// The lock every worker contends for (kept beside the history, whose records carry no name).
pub use crate::history::LOCK_NAME;

/// How long worker processes may take to start and connect.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);
/// How often the runner reads the histories while it waits for something.
const POLL: Duration = Duration::from_millis(5);
/// How long `AwaitGrant` waits.
const GRANT_LIMIT: Duration = Duration::from_secs(10);
/// How long `AwaitNewerWrite` waits beyond the lease.
const NEWER_WRITE_GRACE: Duration = Duration::from_secs(5);
/// Cycles a run plays at most, whatever its length.
const MAX_CYCLES: u32 = 10_000;
/// How long after the stop file the workers may take to finish their round and exit.
const EXIT_GRACE: Duration = Duration::from_secs(15);

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `torture` binary, which the workers run as (`torture worker --config FILE`).
    pub exe: PathBuf,
    /// How long to run; at least the scenario's warm-up, one cycle and its tail. `None`: the
    /// scenario's short (CI) form.
    pub duration: Option<Duration>,
    /// Worker processes; `None`: the scenario's.
    pub workers: Option<u32>,
    /// Keep the histories, configs and worker logs in this directory (else a temporary one).
    pub keep: Option<PathBuf>,
    /// Print each step to stderr as it runs.
    pub verbose: bool,
    /// Which server the lock's Redis stores are.
    pub server: Server,
    /// A broken variant the workers play (`Misbehave::None`: the real code), for showing the
    /// checker fails it.
    pub misbehave: Misbehave,
}

impl Options {
    /// The short form of every scenario, with workers run from `exe`.
    pub fn short(exe: impl Into<PathBuf>) -> Options {
        Options {
            exe: exe.into(),
            duration: None,
            workers: None,
            keep: None,
            verbose: true,
            server: Server::Redis,
            misbehave: Misbehave::None,
        }
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What ran.
    pub scenario: Scenario,
    /// What the checker found.
    pub report: Report,
    /// Where the report breaks the scenario's verdict, and anything else that went wrong
    /// (a step that failed, a worker that crashed).
    pub violations: Vec<String>,
    /// How long the run took, servers included.
    pub wall: Duration,
    /// How many fault cycles were played.
    pub cycles: u32,
}

impl Outcome {
    /// Whether the verdict held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Runs `scenario`.
///
/// # Errors
/// If the servers or workers cannot be started, or the histories cannot be read: the run
/// could not take place. Everything that goes wrong once it runs is in
/// [`Outcome::violations`].
pub fn run(scenario: &Scenario, options: &Options) -> io::Result<Outcome> {
    let started = Instant::now();
    let temp;
    let dir: &Path = match &options.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            dir
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("distlock-torture-")
                .tempdir()?;
            temp.path()
        }
    };
    let workers = options.workers.unwrap_or(scenario.workers).max(1);
    let duration = options
        .duration
        .unwrap_or(scenario.short)
        .max(scenario.min_duration());
    let mut lab = Lab::start(
        scenario.topology,
        workers,
        options.server,
        &scenario.store_args,
        scenario.clocks,
    )?;
    let fence_store = lab.fence_store();
    resource::prepare(&fence_store).map_err(io::Error::other)?;

    let stop_file = dir.join("stop");
    let _ = std::fs::remove_file(&stop_file);
    // A hard limit far beyond the planned end: the stop file normally ends the run.
    let hard_deadline_ms = now_ns() / 1_000_000 + u64_ms(2 * duration + STARTUP_LIMIT);
    let configs: Vec<WorkerConfig> = (0..workers)
        .map(|index| WorkerConfig {
            index,
            backend: lab.backend(index),
            workload: scenario.workload,
            resource_url: lab.resource_url(),
            fence_store: lab.worker_fence_store(index),
            history: dir.join(history_file(index)),
            lock_name: LOCK_NAME.to_owned(),
            ttl_ms: u64_ms(scenario.ttl),
            grace_ms: Some(u64_ms(scenario.grace)),
            strict: scenario.strict,
            hold_min_ms: u64_ms(scenario.hold.0),
            hold_max_ms: u64_ms(scenario.hold.1),
            wait_ms: u64_ms(scenario.wait),
            command_timeout_ms: u64_ms(scenario.command_timeout),
            stop_file: stop_file.clone(),
            deadline_unix_ms: hard_deadline_ms,
            seed: fastrand::u64(..),
            misbehave: options.misbehave,
        })
        .collect();
    for config in &configs {
        let _ = std::fs::remove_file(&config.history);
    }
    let _ = std::fs::remove_file(dir.join(FAULTS_FILE));
    let faults = HistoryWriter::create(&dir.join(FAULTS_FILE), None)?;
    let mut procs = Workers::spawn(&options.exe, dir, &configs, &lab.workers_env())?;
    let mut run = Run {
        scenario,
        lab: &mut lab,
        workers: &mut procs,
        observer: Observer::new(dir, workers),
        faults: &faults,
        holder: None,
        slot: None,
        newer_than: None,
        problems: Vec::new(),
        verbose: options.verbose,
        clock: Instant::now(),
    };
    run.await_startup()?;

    // The schedule: warm-up, cycles while a whole one and the tail still fit, tail.
    run.clock = Instant::now();
    let end = run.clock + duration;
    run.log(&format!("{}: warm-up {:?}", scenario.name, scenario.warmup));
    thread::sleep(scenario.warmup);
    let mut cycles = 0;
    let mut longest = crate::schedule::nominal(&scenario.cycle);
    for _ in 0..MAX_CYCLES {
        let cycle_started = Instant::now();
        for step in &scenario.cycle {
            run.step(step);
        }
        cycles += 1;
        longest = longest.max(cycle_started.elapsed());
        if Instant::now() + longest + scenario.tail > end {
            break;
        }
    }
    let tail = end
        .saturating_duration_since(Instant::now())
        .max(scenario.tail);
    run.log(&format!("tail {tail:?}"));
    thread::sleep(tail);
    std::fs::write(&stop_file, b"stop")?;
    let exits = run
        .workers
        .wait(Instant::now() + scenario.wait + scenario.ttl + EXIT_GRACE);
    let mut problems = std::mem::take(&mut run.problems);
    drop(run);
    for exit in exits {
        match exit.status {
            Some(status) if status.success() => {}
            Some(status) => problems.push(format!(
                "worker {} exited with {status}: {}",
                exit.index, exit.stderr_tail
            )),
            None => problems.push(format!(
                "worker {} did not stop in time and was killed: {}",
                exit.index, exit.stderr_tail
            )),
        }
    }

    let history = History {
        workers: configs
            .iter()
            .map(|c| read_file(&c.history))
            .collect::<io::Result<_>>()?,
        faults: read_file(&dir.join(FAULTS_FILE))?,
    };
    let snapshot =
        resource::snapshot(&lab.resource_url(), &fence_store).map_err(io::Error::other)?;
    drop(lab);
    // Kept beside the histories, so that `torture check DIR` can judge the run again.
    std::fs::write(dir.join(RESOURCE_FILE), serde_json::to_vec(&snapshot)?)?;
    let report = checker::check(&history, &snapshot);
    let mut violations = scenario.expected.judge(&report);
    violations.extend(problems);
    Ok(Outcome {
        scenario: scenario.clone(),
        report,
        violations,
        wall: started.elapsed(),
        cycles,
    })
}

/// A run in progress: what the steps act on and remember.
struct Run<'a> {
    scenario: &'a Scenario,
    lab: &'a mut Lab,
    workers: &'a mut Workers,
    observer: Observer,
    faults: &'a HistoryWriter,
    /// The worker and token of the grant the last `AwaitGrant` saw.
    holder: Option<(u32, u64)>,
    /// The cluster slot whose master was killed.
    slot: Option<u16>,
    /// Where to look for a successor's write: the history marks when the holder was paused.
    newer_than: Option<Vec<usize>>,
    problems: Vec<String>,
    verbose: bool,
    clock: Instant,
}

impl Run<'_> {
    /// Waits until every worker has connected and recorded its start.
    fn await_startup(&mut self) -> io::Result<()> {
        let limit = Instant::now() + STARTUP_LIMIT;
        for _ in 0..100_000 {
            self.observer.poll()?;
            if self.observer.all_started() {
                return Ok(());
            }
            if Instant::now() > limit {
                break;
            }
            thread::sleep(POLL * 4);
        }
        let exits = self.workers.wait(Instant::now());
        Err(io::Error::other(format!(
            "the workers did not all start within {STARTUP_LIMIT:?}: {exits:?}"
        )))
    }

    fn log(&self, what: &str) {
        if self.verbose {
            eprintln!("[{:>7.3}s] {what}", self.clock.elapsed().as_secs_f64());
        }
    }

    /// Plays one step; a step that fails is recorded as a problem and the run goes on.
    fn step(&mut self, step: &Step) {
        let label = step.to_string();
        let label = match (step, self.holder) {
            (
                Step::PauseHolder | Step::ResumeHolder | Step::Net(Target::Holder, _),
                Some((w, _)),
            ) => {
                format!("{label} (worker {w})")
            }
            _ => label,
        };
        self.log(&label);
        if step.effect() == Effect::Fault {
            self.faults.record(Event::FaultStarted {
                label: label.clone(),
            });
        }
        if let Err(e) = self.apply(step) {
            self.log(&format!("  failed: {e}"));
            self.problems.push(format!("step \"{label}\" failed: {e}"));
        }
        if step.effect() == Effect::Heal {
            self.faults.record(Event::FaultHealed { label });
        }
    }

    fn apply(&mut self, step: &Step) -> io::Result<()> {
        match step {
            Step::Sleep(d) => thread::sleep(*d),
            Step::AwaitGrant => self.await_grant()?,
            Step::PauseHolder => {
                let (worker, _) = self.holder()?;
                self.observer.poll()?;
                self.newer_than = Some(self.observer.mark());
                self.workers.pause(worker as usize)?;
            }
            Step::AwaitNewerWrite => self.await_newer_write()?,
            Step::ResumeHolder => {
                let (worker, _) = self.holder()?;
                self.workers.resume(worker as usize)?;
            }
            Step::Net(target, fault) => {
                let all_workers: Vec<u32> = (0..self.scenario_workers()).collect();
                let all_nodes: Vec<usize> = (0..self.lab.node_count()).collect();
                match target {
                    Target::Nodes(nodes) => self.lab.net(&all_workers, nodes, *fault),
                    Target::Holder => {
                        let (worker, _) = self.holder()?;
                        self.lab.net(&[worker], &all_nodes, *fault);
                    }
                    Target::Others(nodes) => {
                        let (holder, _) = self.holder()?;
                        let others: Vec<u32> = all_workers
                            .iter()
                            .copied()
                            .filter(|&w| w != holder)
                            .collect();
                        self.lab.net(&others, nodes, *fault);
                        // Only these paths: the holder stays as it was.
                        return Ok(());
                    }
                }
                if *fault == Net::Heal {
                    // Latency set on other targets is healed too: heal means clean.
                    self.lab.net(&all_workers, &all_nodes, Net::Heal);
                }
            }
            Step::Kill(n) => self.lab.kill(*n)?,
            Step::RestartEmpty(n) => self.lab.restart_empty(*n)?,
            Step::Pause(n) => self.lab.pause(*n)?,
            Step::Fill { node, mb } => self.lab.fill(*node, *mb)?,
            Step::Resume(n) => self.lab.resume(*n)?,
            Step::KillLockMaster => self.slot = Some(self.lab.kill_lock_master(LOCK_NAME)?),
            Step::AwaitFailover => {
                let slot = self
                    .slot
                    .ok_or_else(|| io::Error::other("no master was killed"))?;
                self.lab.await_failover(slot)?;
            }
            Step::RestartKilledMaster => self.lab.restart_killed_master()?,
            Step::StopPostgres { fast } => self.lab.stop_postgres(*fast)?,
            Step::StartPostgres => self.lab.start_postgres()?,
            Step::StopMysql => self.lab.stop_mysql()?,
            Step::StartMysql => self.lab.start_mysql()?,
            Step::KillS3 => self.lab.kill_s3()?,
            Step::StartS3 => self.lab.start_s3()?,
            Step::TerminateBackends => self.lab.terminate_backends()?,
            Step::KillEtcdLeader => self.lab.kill_etcd_leader()?,
            Step::AwaitEtcdLeader => self.lab.await_etcd_leader()?,
            Step::RestartEtcdMember => self.lab.restart_etcd_member()?,
            Step::PartitionEtcdLeader => self.lab.partition_etcd_leader()?,
            Step::HealEtcdPartition => self.lab.heal_etcd_partition()?,
            Step::ClockJump { of, by_ms } => self.lab.clock(*of)?.jump(*by_ms)?,
            Step::ClockBack(of) => self.lab.clock(*of)?.set_offset(0)?,
            Step::RestartEtcdMemberAhead(further) => {
                self.lab.restart_etcd_member_ahead(*further)?;
            }
            Step::StopEtcdCluster => self.lab.stop_etcd()?,
            Step::StartEtcdCluster => self.lab.start_etcd()?,
        }
        Ok(())
    }

    fn scenario_workers(&self) -> u32 {
        u32::try_from(self.observer.mark().len()).unwrap_or(u32::MAX)
    }

    fn holder(&self) -> io::Result<(u32, u64)> {
        self.holder
            .ok_or_else(|| io::Error::other("no holder: the cycle needs an AwaitGrant first"))
    }

    /// Waits for a grant that arrives after now and remembers its holder.
    fn await_grant(&mut self) -> io::Result<()> {
        self.observer.poll()?;
        let mark = self.observer.mark();
        let holder =
            self.observer
                .wait_for(&mark, GRANT_LIMIT, POLL, "grant", |worker, r| {
                    match r.event {
                        Event::Granted { token, .. } => Some((worker, token)),
                        _ => None,
                    }
                })?;
        self.holder = Some(holder);
        Ok(())
    }

    /// Waits until a write with a larger token than the holder's was accepted since it was
    /// paused.
    fn await_newer_write(&mut self) -> io::Result<()> {
        let (_, token) = self.holder()?;
        let mark = self.newer_than.clone().unwrap_or_default();
        let wait = self.scenario.ttl + NEWER_WRITE_GRACE;
        self.observer
            .wait_for(&mark, wait, POLL, "write by a successor", |_, r| {
                matches!(r.event, Event::Write { accepted: true, token: t, .. } if t > token)
                    .then_some(())
            })
    }
}

fn u64_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Reads a kept run directory back (`worker-N.jsonl`, `faults.jsonl`, `resource.json`), for
/// judging it again.
///
/// # Errors
/// If a file is missing or does not parse.
pub fn load(dir: &Path) -> io::Result<(History, resource::Snapshot)> {
    let mut workers = Vec::new();
    for index in 0..u32::MAX {
        let path = dir.join(history_file(index));
        if !path.exists() {
            break;
        }
        workers.push(read_file(&path)?);
    }
    let faults = read_file(&dir.join(FAULTS_FILE))?;
    let snapshot = serde_json::from_slice(&std::fs::read(dir.join(RESOURCE_FILE))?)?;
    Ok((History { workers, faults }, snapshot))
}
