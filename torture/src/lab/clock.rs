//! The lab's clocks: which processes run on a libfaketime clock, and the clock faults.

use std::ffi::OsString;
use std::io;
use std::time::Duration;

use lock_testkit::{FakeClock, Faked};

use super::Lab;
use crate::scenario::{Clocks, Topology};
use crate::schedule::ClockOf;

/// The clock of each lock server of `topology` (a Redis, a Redlock node, the PostgreSQL):
/// none on [`Clocks::Real`] and for the servers that are not run per node (a cluster's, etcd's).
pub(super) fn node_clocks(
    topology: Topology,
    clocks: Clocks,
) -> io::Result<Vec<Option<FakeClock>>> {
    let nodes = match topology {
        Topology::Single | Topology::Postgres | Topology::Mysql => 1,
        Topology::Redlock(n) => n,
        Topology::Cluster | Topology::Etcd | Topology::ObjectStore => 0,
    };
    (0..nodes)
        .map(|node| match clocks {
            Clocks::Real => Ok(None),
            Clocks::Faked => FakeClock::new().map(Some),
            // A fast oscillator speeds every clock of the machine, the monotonic ones too.
            Clocks::Fast { node: fast, rate } if fast == node => {
                FakeClock::with(Faked::All, rate).map(Some)
            }
            Clocks::Fast { .. } => FakeClock::new().map(Some),
        })
        .collect()
}

/// The clock the workers share: their wall clock only, so that a jump moves what
/// `SystemTime` reads and leaves the monotonic clock, which the history and distlock's leases
/// use, alone.
pub(super) fn workers_clock(clocks: Clocks) -> io::Result<Option<FakeClock>> {
    match clocks {
        Clocks::Real => Ok(None),
        Clocks::Faked | Clocks::Fast { .. } => FakeClock::new().map(Some),
    }
}

impl Lab {
    /// The environment that puts a worker process on the workers' clock (empty: the real one).
    pub(crate) fn workers_env(&self) -> Vec<(OsString, OsString)> {
        self.workers_clock
            .as_ref()
            .map(FakeClock::env)
            .unwrap_or_default()
    }

    /// The clock `of` names.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] when the scenario does not run it on libfaketime.
    pub(crate) fn clock(&self, of: ClockOf) -> io::Result<&FakeClock> {
        let clock = match of {
            ClockOf::Node(n) => self.clocks.get(n).and_then(Option::as_ref),
            ClockOf::Workers => self.workers_clock.as_ref(),
        };
        clock.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{of} is not faked: the scenario needs Clocks::Faked"),
            )
        })
    }

    /// Starts the killed etcd member again with its monotonic clock `further` ahead.
    pub(crate) fn restart_etcd_member_ahead(&mut self, further: Duration) -> io::Result<()> {
        let member = self.etcd_faulted.take().ok_or_else(|| {
            io::Error::other("no etcd member was killed: the cycle needs KillEtcdLeader first")
        })?;
        self.etcd_mut()?.restart_ahead(member, further)
    }
}
