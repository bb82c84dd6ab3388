//! The fault schedule: what the runner does to servers, the network and workers, step by
//! step, while the workers run.

use std::fmt;
use std::time::Duration;

/// Which proxies a network fault applies to. Every worker reaches every server through a
/// proxy of its own, so a fault can cut one server off from everybody or one worker off from
/// every server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// These servers (by index), for every worker.
    Nodes(Vec<usize>),
    /// Every server, for the worker remembered by the last [`Step::AwaitGrant`].
    Holder,
    /// These servers, for every worker but the remembered holder; a heal here heals only
    /// these paths (the holder stays cut off from them).
    Others(Vec<usize>),
}

/// A network fault, applied through the [`FaultProxy`](lock_testkit::FaultProxy)s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// This much delay each way on every chunk.
    Latency(Duration),
    /// A full partition: bytes stop, connections time out, and connections that lived
    /// through it are closed when it heals.
    Partition,
    /// Back to clean forwarding.
    Heal,
}

/// Whose clock a clock step moves (a scenario on [`Clocks::Faked`](crate::scenario::Clocks)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockOf {
    /// Lock server `n`'s: a Redis, a Redlock node, the PostgreSQL (node 0).
    Node(usize),
    /// Every worker's (the clients').
    Workers,
}

/// One step of a scenario's fault cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Lets the workers run.
    Sleep(Duration),
    /// Waits (bounded) for a grant that arrives after this step starts, and remembers its
    /// holder for the steps that follow.
    AwaitGrant,
    /// `SIGSTOP`s the remembered holder: a process pause (GC, swap, a stopped VM).
    PauseHolder,
    /// Waits (bounded) until the resource accepted a write with a larger token than the
    /// remembered holder's: a successor took over and wrote while the holder was away.
    AwaitNewerWrite,
    /// `SIGCONT`s the remembered holder, which carries on with its write.
    ResumeHolder,
    /// A network fault.
    Net(Target, Net),
    /// `SIGKILL`s this server.
    Kill(usize),
    /// Starts this server again with no data (killing it first if it runs).
    RestartEmpty(usize),
    /// `SIGSTOP`s this server.
    Pause(usize),
    /// Writes this many MB of other keys (100 KB values) to server `node`, straight, not
    /// through the proxies: another application of the same Redis, for a server with a
    /// `maxmemory` to evict keys.
    Fill {
        /// The server.
        node: usize,
        /// How much, in MB.
        mb: u32,
    },
    /// `SIGCONT`s this server.
    Resume(usize),
    /// Redis Cluster: `SIGKILL`s the master that owns the lock's slot.
    KillLockMaster,
    /// Redis Cluster: waits (bounded) until a replica took over the lock's slot.
    AwaitFailover,
    /// Redis Cluster: starts the killed master again; it rejoins as a replica.
    RestartKilledMaster,
    /// PostgreSQL: shuts the server down by its PID, fast (`SIGINT`: a checkpoint, then exit)
    /// or immediate (`SIGQUIT`: like a crash; the next start runs crash recovery).
    StopPostgres {
        /// Fast rather than immediate.
        fast: bool,
    },
    /// PostgreSQL: starts the server again with its data, on its port.
    StartPostgres,
    /// MariaDB: `SIGKILL`s the server by its PID (a crash; InnoDB recovers on the next start).
    StopMysql,
    /// MariaDB: starts the server again with its data, on its port.
    StartMysql,
    /// SeaweedFS: `SIGKILL`s the S3 server by its PID (a crash); its data stays.
    KillS3,
    /// SeaweedFS: starts the S3 server again on its data, on its ports.
    StartS3,
    /// PostgreSQL: `pg_terminate_backend` on every session of the workers (the holder's
    /// included); the server and the lease table stay.
    TerminateBackends,
    /// etcd: `SIGKILL`s the member that leads now (a bounded wait for the members to agree
    /// on one first), and remembers it.
    KillEtcdLeader,
    /// etcd: waits (bounded) until the members that run agree on a new leader.
    AwaitEtcdLeader,
    /// etcd: starts the remembered member again, on its ports and data directory.
    RestartEtcdMember,
    /// etcd: partitions the member that leads now from its clients and its peers (a
    /// minority of one), and remembers it.
    PartitionEtcdLeader,
    /// etcd: heals the remembered member's partition.
    HealEtcdPartition,
    /// Moves a wall clock by this many milliseconds (negative: back), at once, with
    /// libfaketime: what an NTP step or an operator's `date -s` does. The monotonic clocks do
    /// not move.
    ClockJump {
        /// Whose clock.
        of: ClockOf,
        /// By how much, in ms.
        by_ms: i64,
    },
    /// Sets a wall clock back to the real time (a jump back by its offset).
    ClockBack(ClockOf),
    /// etcd: starts the remembered member again with its monotonic and boot-time clocks this
    /// much further ahead than at its last start (a Linux time namespace: `unshare --time`),
    /// so that each member it lives through leads on a clock of its own.
    RestartEtcdMemberAhead(Duration),
    /// etcd: `SIGKILL`s every member: the whole cluster is down.
    StopEtcdCluster,
    /// etcd: starts every member again on its data directory and waits (bounded) until each
    /// is healthy.
    StartEtcdCluster,
}

/// What a step means for the recovery measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Starts a fault.
    Fault,
    /// Ends one: the time to the next grant is measured from here.
    Heal,
    /// Neither.
    None,
}

impl Step {
    /// Whether the step starts or ends a fault.
    pub fn effect(&self) -> Effect {
        match self {
            Step::PauseHolder
            | Step::Kill(_)
            | Step::Pause(_)
            | Step::Fill { .. }
            | Step::KillLockMaster
            | Step::StopPostgres { .. }
            | Step::StopMysql
            | Step::KillS3
            | Step::KillEtcdLeader
            | Step::PartitionEtcdLeader
            | Step::StopEtcdCluster
            | Step::ClockJump { .. }
            | Step::Net(_, Net::Latency(_) | Net::Partition) => Effect::Fault,
            Step::ResumeHolder
            | Step::RestartEmpty(_)
            | Step::Resume(_)
            | Step::AwaitFailover
            | Step::StartPostgres
            | Step::StartMysql
            | Step::StartS3
            // Over as soon as it is done: the time to the next grant counts from there.
            | Step::TerminateBackends
            // A new leader: the cluster serves again, without the killed member.
            | Step::AwaitEtcdLeader
            | Step::RestartEtcdMember
            | Step::HealEtcdPartition
            | Step::StartEtcdCluster
            | Step::ClockBack(_)
            | Step::RestartEtcdMemberAhead(_)
            | Step::Net(_, Net::Heal) => Effect::Heal,
            Step::Sleep(_)
            | Step::AwaitGrant
            | Step::AwaitNewerWrite
            | Step::RestartKilledMaster => Effect::None,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Nodes(nodes) => write!(f, "node {nodes:?}"),
            Target::Holder => f.write_str("the holder"),
            Target::Others(nodes) => write!(f, "node {nodes:?} for all but the holder"),
        }
    }
}

impl fmt::Display for ClockOf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockOf::Node(n) => write!(f, "node {n}'s clock"),
            ClockOf::Workers => f.write_str("the workers' clocks"),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Sleep(d) => write!(f, "run for {d:?}"),
            Step::AwaitGrant => f.write_str("wait for a grant"),
            Step::PauseHolder => f.write_str("SIGSTOP the holder"),
            Step::AwaitNewerWrite => f.write_str("wait for a successor's write"),
            Step::ResumeHolder => f.write_str("SIGCONT the holder"),
            Step::Net(target, Net::Latency(d)) => write!(f, "{d:?} latency each way to {target}"),
            Step::Net(target, Net::Partition) => write!(f, "partition {target}"),
            Step::Net(target, Net::Heal) => write!(f, "heal {target}"),
            Step::Kill(n) => write!(f, "SIGKILL node {n}"),
            Step::RestartEmpty(n) => write!(f, "restart node {n} empty"),
            Step::Pause(n) => write!(f, "SIGSTOP node {n}"),
            Step::Fill { node, mb } => write!(f, "write {mb} MB of other keys to node {node}"),
            Step::Resume(n) => write!(f, "SIGCONT node {n}"),
            Step::KillLockMaster => f.write_str("SIGKILL the lock's master (its replica lagging)"),
            Step::AwaitFailover => f.write_str("replica took over"),
            Step::RestartKilledMaster => f.write_str("restart the old master"),
            Step::StopPostgres { fast: true } => f.write_str("stop PostgreSQL (fast)"),
            Step::StopPostgres { fast: false } => f.write_str("stop PostgreSQL (immediate)"),
            Step::StartPostgres => f.write_str("start PostgreSQL again"),
            Step::StopMysql => f.write_str("kill MariaDB"),
            Step::StartMysql => f.write_str("start MariaDB again"),
            Step::KillS3 => f.write_str("kill SeaweedFS"),
            Step::StartS3 => f.write_str("start SeaweedFS again"),
            Step::TerminateBackends => f.write_str("pg_terminate_backend the workers' sessions"),
            Step::KillEtcdLeader => f.write_str("SIGKILL the etcd leader"),
            Step::AwaitEtcdLeader => f.write_str("a new etcd leader elected"),
            Step::RestartEtcdMember => f.write_str("restart the killed etcd member"),
            Step::PartitionEtcdLeader => f.write_str("partition the etcd leader"),
            Step::HealEtcdPartition => f.write_str("heal the etcd partition"),
            Step::ClockJump { of, by_ms } => write!(f, "jump {of} by {by_ms:+} ms"),
            Step::ClockBack(of) => write!(f, "set {of} back to the real time"),
            Step::RestartEtcdMemberAhead(d) => write!(
                f,
                "restart the killed etcd member, its monotonic clock {d:?} further ahead"
            ),
            Step::StopEtcdCluster => f.write_str("SIGKILL every etcd member"),
            Step::StartEtcdCluster => f.write_str("start every etcd member again"),
        }
    }
}

/// The total of a cycle's sleeps: a lower bound of its length.
pub fn nominal(cycle: &[Step]) -> Duration {
    cycle
        .iter()
        .map(|step| match step {
            Step::Sleep(d) => *d,
            _ => Duration::ZERO,
        })
        .sum()
}
