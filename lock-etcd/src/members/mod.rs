//! [`Members`]: the channel under the etcd client, one tonic channel per member, which sends
//! every request to a member that answers (see [`roster`] for the policy).
//!
//! Why not etcd-client's own channel: it balances requests at random over every endpoint,
//! reachable or not. A member cut off by a partition keeps its connection open and swallows
//! its share of the requests until they time out, and a connection that lived through the cut
//! may stall for seconds after the heal (TCP's retransmission backoff), so clients came back
//! 5 to 12 s after a healed leader partition. Here an unanswered request moves the client to
//! the next member at once, and the member's channel is made anew before it is tried again.

mod roster;
mod service;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tonic::transport::{Channel, Endpoint};

use roster::{Outcome, Roster, Skips};

/// How often an HTTP/2 ping checks a connection that carries a stream (a watch, a lease
/// keep-alive) but no traffic. etcd answers a client that pings more often than its
/// `--grpc-keepalive-min-time` (5 s by default) with `GOAWAY` (`too_many_pings`) and closes
/// the connection; unanswered requests are what tells a dead member here, not pings.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a member whose request went unanswered is skipped, at least (see [`skips`]).
const UNREACHABLE_SKIP_MIN: Duration = Duration::from_secs(2);
/// How long a member that answered `Unavailable` is skipped: about the rest of an election.
const UNREADY_SKIP: Duration = Duration::from_millis(250);

/// How the members are reached: their endpoints and the client's timeouts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// The connect timeout of each member's channel.
    pub(crate) connect: Duration,
    /// The command timeout: a request dropped unanswered after half of it is taken to have
    /// timed out at its caller.
    pub(crate) command: Duration,
}

/// One tonic channel per member, the member requests go to, and what the last requests to
/// each came to. Cloned handles share all of it.
#[derive(Clone)]
pub(crate) struct Members {
    shared: Arc<Shared>,
}

struct Shared {
    endpoints: Vec<Endpoint>,
    state: Mutex<State>,
    /// A request dropped unanswered after this long counts as unreachable.
    abandoned_after: Duration,
    /// The current member, for the release watch to follow.
    current: watch::Sender<usize>,
}

struct State {
    roster: Roster,
    /// Each member's channel and the roster generation it was made for.
    channels: Vec<(u64, Channel)>,
}

/// Where one request goes.
struct Route {
    member: usize,
    generation: u64,
    channel: Channel,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Members")
            .field("members", &self.shared.endpoints.len())
            .field("current", &*self.shared.current.borrow())
            .finish()
    }
}

impl Members {
    /// A channel per endpoint (`http://host:port` or `host:port`), connected lazily: nothing
    /// is sent before the first request. Must be called inside a tokio runtime (each channel
    /// runs a task on it).
    ///
    /// # Errors
    /// [`etcd_client::Error::InvalidArgs`] for no endpoint or an `https://` one (this build
    /// has no TLS), [`etcd_client::Error::InvalidUri`] for a malformed one.
    pub(crate) fn new(urls: &[String], timing: Timing) -> Result<Self, etcd_client::Error> {
        if urls.is_empty() {
            return Err(etcd_client::Error::InvalidArgs("no etcd endpoint".into()));
        }
        let endpoints = urls
            .iter()
            .map(|url| endpoint(url, timing))
            .collect::<Result<Vec<_>, _>>()?;
        let channels = endpoints.iter().map(|e| (0, e.connect_lazy())).collect();
        let (current, _) = watch::channel(0);
        Ok(Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    roster: Roster::new(endpoints.len(), skips(timing)),
                    channels,
                }),
                endpoints,
                abandoned_after: timing.command / 2,
                current,
            }),
        })
    }

    /// Tells when requests move to another member: the release watch follows them there.
    pub(crate) fn moves(&self) -> watch::Receiver<usize> {
        self.shared.current.subscribe()
    }

    /// The member the next request goes to, and its channel (made anew if its last one was
    /// retired).
    fn route(&self) -> Route {
        let mut state = self.state();
        let member = state.roster.pick(Instant::now());
        let generation = state.roster.generation(member);
        let endpoint = &self.shared.endpoints[member];
        let slot = &mut state.channels[member];
        if slot.0 != generation {
            // The old channel and its stalled connection close when their last request ends.
            *slot = (generation, endpoint.connect_lazy());
        }
        let channel = slot.1.clone();
        drop(state);
        self.shared.current.send_if_modified(|current| {
            let moved = *current != member;
            *current = member;
            moved
        });
        Route {
            member,
            generation,
            channel,
        }
    }

    /// Records what a request sent by [`route`](Self::route) came to.
    fn report(&self, member: usize, generation: u64, outcome: Outcome) {
        self.state()
            .roster
            .report(member, generation, outcome, Instant::now());
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The roster is consistent after every statement: a panic elsewhere cannot break it.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The skips of [`roster`]: a member that did not answer is left alone for two command
/// timeouts and a connect timeout (at least 2 s), time for an election among the others;
/// one that answered `Unavailable`, for a quarter second.
fn skips(timing: Timing) -> Skips {
    Skips {
        unreachable: (2 * timing.command + timing.connect).max(UNREACHABLE_SKIP_MIN),
        unready: UNREADY_SKIP,
    }
}

/// The tonic endpoint of `url`: connect timeout, a request timeout of the command timeout
/// (a safety net: every caller bounds its requests itself), and HTTP/2 pings only while a
/// stream is open (etcd refuses pings on an idle connection).
fn endpoint(url: &str, timing: Timing) -> Result<Endpoint, etcd_client::Error> {
    if url.starts_with("https://") {
        return Err(etcd_client::Error::InvalidArgs(format!(
            "{url}: https:// endpoints need TLS, which this build of lock-etcd does not include"
        )));
    }
    let url = if url.starts_with("http://") {
        url.to_owned()
    } else {
        format!("http://{url}")
    };
    let endpoint = Endpoint::from_shared(url)
        .map_err(|err| etcd_client::Error::InvalidArgs(err.to_string()))?;
    Ok(endpoint
        .connect_timeout(timing.connect)
        .timeout(timing.command)
        .tcp_nodelay(true)
        .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(timing.command)
        .keep_alive_while_idle(false))
}
