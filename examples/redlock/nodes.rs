//! The five local Redis masters: start, kill, hang, bring back, and look at one key on each.

use std::fmt;
use std::time::Duration;

use distlock::{redis::RedisLock, redlock::Redlock};
use lock_testkit::RedisServer;

/// How long a node may take to answer the example's own inspection commands.
const INSPECT_TIMEOUT: Duration = Duration::from_millis(500);

/// What state a node is in, as the example put it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Up,
    /// Killed with SIGKILL.
    Down,
    /// Stopped with SIGSTOP: its port is open, it answers nothing.
    Hung,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::Hung => "hung",
        })
    }
}

/// Five throwaway redis-servers on free loopback ports, each killed by its PID when dropped.
pub(crate) struct Nodes {
    servers: Vec<RedisServer>,
    states: Vec<State>,
}

impl Nodes {
    pub(crate) fn start(n: usize) -> std::io::Result<Self> {
        let servers = (0..n)
            .map(|_| RedisServer::start())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            states: vec![State::Up; n],
            servers,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.servers.len()
    }

    pub(crate) fn name(i: usize) -> String {
        format!("redis-{}", i + 1)
    }

    pub(crate) fn port(&self, i: usize) -> u16 {
        self.servers[i].port()
    }

    pub(crate) fn state(&self, i: usize) -> State {
        self.states[i]
    }

    pub(crate) fn up(&self) -> usize {
        self.states.iter().filter(|s| **s == State::Up).count()
    }

    pub(crate) fn states(&self) -> String {
        (0..self.len())
            .map(|i| format!("{} {}", Self::name(i), self.states[i]))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A Redlock client over all five: its own connection to each node.
    pub(crate) fn client(&self) -> Result<Redlock, distlock::LockError> {
        let mut builder = Redlock::builder();
        for (i, server) in self.servers.iter().enumerate() {
            // RedisLock's default command timeout (1 s) is above every default Redlock node
            // timeout (at most 500 ms), so the Redlock's fires first and the connection is
            // kept: requests to a hung node queue on it in order (an acquire, then its release).
            // The store grace period: the fleet's longest lease, so a node that comes back
            // empty does not vote until every lease it knew of has ended.
            let node = RedisLock::builder()
                .url(server.url())
                .connect_timeout(Duration::from_millis(500))
                .grace(crate::workload::TTL)
                .build()?;
            builder = builder.named_node(Self::name(i), node);
        }
        builder.build()
    }

    /// SIGKILL: a crash, losing every key (the servers run without persistence).
    pub(crate) fn kill(&mut self, i: usize) {
        self.servers[i].stop();
        self.states[i] = State::Down;
    }

    /// SIGSTOP: a hung process.
    pub(crate) fn hang(&mut self, i: usize) -> std::io::Result<()> {
        self.servers[i].pause()?;
        self.states[i] = State::Hung;
        Ok(())
    }

    /// Brings a node back: SIGCONT for a hung one, a fresh (empty) start for a killed one.
    pub(crate) fn bring_back(&mut self, i: usize) -> std::io::Result<()> {
        match self.states[i] {
            State::Up => {}
            State::Hung => self.servers[i].resume()?,
            State::Down => self.servers[i].start_again()?,
        }
        self.states[i] = State::Up;
        Ok(())
    }

    /// For each node: `Some(value of key)` if it is up and answered, `None` otherwise.
    pub(crate) async fn read(&self, key: &str) -> Vec<Option<Option<String>>> {
        let mut out = Vec::with_capacity(self.len());
        for (i, server) in self.servers.iter().enumerate() {
            if self.states[i] != State::Up {
                out.push(None);
                continue;
            }
            let value = tokio::time::timeout(INSPECT_TIMEOUT, async {
                let mut conn = redis::Client::open(server.url())
                    .ok()?
                    .get_multiplexed_async_connection()
                    .await
                    .ok()?;
                redis::cmd("GET")
                    .arg(key)
                    .query_async::<Option<String>>(&mut conn)
                    .await
                    .ok()
            })
            .await
            .ok()
            .flatten();
            out.push(value);
        }
        out
    }

    /// Waits (at most 3 s) until no live node has `key`; the nodes still holding it otherwise.
    pub(crate) async fn wait_gone(&self, key: &str) -> Vec<usize> {
        let mut holding = Vec::new();
        for _ in 0..60 {
            holding = self
                .read(key)
                .await
                .iter()
                .enumerate()
                .filter(|(_, v)| matches!(v, Some(Some(_))))
                .map(|(i, _)| i)
                .collect();
            if holding.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        holding
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        // A hung server is killed all the same (SIGKILL ends a stopped process); resume first
        // so nothing is left stopped should a kill fail.
        for (i, server) in self.servers.iter().enumerate() {
            if self.states[i] == State::Hung {
                let _ = server.resume();
            }
        }
    }
}
