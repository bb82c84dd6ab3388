//! [`FaultProxy`]: a TCP proxy in front of one server that injects network
//! faults on request, while a test runs.

mod conn;
mod state;

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener as StdListener};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use tokio::net::TcpListener;

use state::{Mode, Shared};

/// Pause after a failed `accept` (e.g. out of file descriptors), so the
/// loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// A TCP proxy on `127.0.0.1:<free port>` that forwards every connection to
/// an upstream server and injects faults on request: latency, stalls,
/// partitions, refused and reset connections, and replies cut mid-way.
///
/// Point the client at [`url`](Self::url) (or [`addr`](Self::addr)) instead
/// of the server, then switch faults from the test while the client runs.
/// The proxy runs on its own thread with its own single-threaded tokio
/// runtime on the real clock, so it works the same from synchronous tests,
/// async tests, and tests on tokio's paused clock. Every switch takes effect
/// immediately, for open and new connections alike; [`heal`](Self::heal)
/// returns to clean forwarding.
///
/// | switch | open connections | new connections |
/// |---|---|---|
/// | [`set_latency`](Self::set_latency) | every chunk delayed, each way | same |
/// | [`stall`](Self::stall) | bytes held back, delivered in order on heal | accepted, held, connected upstream on heal |
/// | [`partition`](Self::partition) | bytes held back, connection closed on heal | accepted, held, closed on heal |
/// | [`refuse`](Self::refuse) | closed now | accepted and reset at once |
/// | [`reset_connections`](Self::reset_connections) | closed now | forwarded |
/// | [`sever`](Self::sever) | bytes held back for good, never closed (half-open) | forwarded |
/// | [`cut_next_reply`](Self::cut_next_reply) | the next reply chunk is truncated and its connection closed | same |
///
/// Dropping the proxy stops its thread and closes every connection.
///
/// ```no_run
/// use std::time::Duration;
/// use lock_testkit::{FaultProxy, RedisServer};
///
/// let server = RedisServer::start()?;
/// let proxy = FaultProxy::start(server.addr())?;
/// let client = redis::Client::open(proxy.url());
/// proxy.set_latency(Duration::from_millis(50)); // every round trip now takes >= 100 ms
/// proxy.partition();                            // requests time out
/// proxy.heal();                                 // connections that lived through it close
/// # drop(client);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct FaultProxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let faults = *self.shared.faults.borrow();
        f.debug_struct("FaultProxy")
            .field("addr", &self.addr)
            .field("upstream", &self.shared.upstream())
            .field("mode", &faults.mode)
            .field("latency", &faults.latency)
            .field("connections", &self.connections())
            .finish()
    }
}

impl FaultProxy {
    /// Listens on `127.0.0.1:<free port>` and forwards every accepted
    /// connection to `upstream`, on a thread of its own.
    ///
    /// The listener is bound before this returns, so clients may connect at
    /// once. The upstream is connected per client connection, when bytes may
    /// first flow; if it cannot be reached (within 5 s) the client's
    /// connection is closed.
    ///
    /// # Errors
    ///
    /// If the listening socket cannot be bound, or the proxy thread or its
    /// runtime cannot be created.
    pub fn start(upstream: SocketAddr) -> io::Result<FaultProxy> {
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let shared = Arc::new(Shared::new(upstream));
        let for_thread = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name(format!("fault-proxy-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(listener) => accept_loop(listener, for_thread).await,
                        Err(err) => eprintln!("fault proxy on {addr}: {err}"),
                    }
                });
                // Dropping the runtime here drops every connection task,
                // which closes both of its sockets.
                drop(runtime);
            })?;
        Ok(FaultProxy {
            shared,
            addr,
            thread: Some(thread),
        })
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:<port>`, for clients of a server without a password.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The server new connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream()
    }

    /// Forwards connections opened from now on to `upstream` (open ones stay
    /// with the old server), e.g. after a server came back on another port.
    pub fn set_upstream(&self, upstream: SocketAddr) {
        self.shared.set_upstream(upstream);
    }

    /// Delays every chunk by `one_way` in each direction, so a request and
    /// its reply take at least `2 × one_way` more; `Duration::ZERO` removes
    /// the delay. Chunks already queued keep the delay they were read with.
    pub fn set_latency(&self, one_way: Duration) {
        self.shared.update(|f| f.latency = one_way);
    }

    /// Stops bytes flowing both ways while keeping every connection open,
    /// like a network that silently drops packets for a while: requests time
    /// out, no reset arrives. New connections are accepted (the client's
    /// connect succeeds) but held. On [`heal`](Self::heal) the held bytes are
    /// delivered in order, as TCP would after retransmitting, and held new
    /// connections are forwarded.
    pub fn stall(&self) {
        self.shared.update(|f| f.mode = Mode::Stall);
    }

    /// A full partition: as [`stall`](Self::stall) while it lasts, but a
    /// partition that outlives the peers' patience ends their connections.
    /// On [`heal`](Self::heal) (or any switch out of the partition) every
    /// connection that was open during it, including those accepted during
    /// it, is closed and the bytes it held are dropped; clients then see a
    /// closed connection and must reconnect. Connections opened after the
    /// heal work.
    pub fn partition(&self) {
        self.shared.update(|f| {
            f.mode = Mode::Partition;
            f.partitions += 1;
        });
    }

    /// Closes every open connection now and resets new ones as soon as they
    /// are accepted, so clients fail fast (as against a server that is down)
    /// rather than time out. Lasts until [`heal`](Self::heal).
    pub fn refuse(&self) {
        self.shared.update(|f| {
            f.mode = Mode::Refuse;
            f.resets += 1;
        });
    }

    /// Closes every connection open now, once; connections opened afterwards
    /// are forwarded as usual.
    pub fn reset_connections(&self) {
        self.shared.update(|f| f.resets += 1);
    }

    /// Kills every connection open now *silently*, for good: its bytes are
    /// held back both ways and never delivered, and it is never closed (no
    /// FIN, no RST), like a link that died without a reset (a NAT or
    /// firewall entry dropped, the peer's machine gone): a half-open
    /// connection, on which a client that only reads waits forever.
    /// Connections opened afterwards are forwarded as usual, and
    /// [`heal`](Self::heal) does not revive the severed ones; a reset,
    /// [`refuse`](Self::refuse) or dropping the proxy closes them.
    pub fn sever(&self) {
        self.shared.update(|f| f.severs += 1);
    }

    /// Forwards only the first `after_bytes` bytes of the next chunk sent by
    /// the server (on any connection) and then closes that connection: a
    /// connection lost in the middle of a reply. One chunk is cut per call.
    pub fn cut_next_reply(&self, after_bytes: usize) {
        self.shared.set_cut(Some(after_bytes));
    }

    /// Back to clean forwarding: no latency, no stall, partition or refusal,
    /// no pending cut. Bytes held by a [`stall`](Self::stall) are delivered;
    /// connections that lived through a [`partition`](Self::partition) are
    /// closed (see there).
    pub fn heal(&self) {
        self.shared.set_cut(None);
        self.shared.update(|f| {
            f.mode = Mode::Flow;
            f.latency = Duration::ZERO;
        });
    }

    /// How many client connections are open now. A closed connection is
    /// counted until its task has finished, which is soon but not instant:
    /// poll rather than read it once.
    pub fn connections(&self) -> usize {
        self.shared.open_connections()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.update(|f| f.shutdown = true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Accepts connections until shutdown; refused ones are reset at once.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut faults = shared.faults.subscribe();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if faults.borrow().mode == Mode::Refuse {
                        // RST rather than FIN: the client fails at once.
                        let _ = stream.set_zero_linger();
                        drop(stream);
                    } else {
                        tokio::spawn(conn::serve(stream, Arc::clone(&shared)));
                    }
                }
                Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
            },
            changed = faults.changed() => {
                if changed.is_err() || faults.borrow().shutdown {
                    return;
                }
            }
        }
    }
}
