//! One proxied connection: two directions of chunks, each delayed, held back
//! or cut according to the shared [`Faults`].

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until, timeout};

use super::state::{Fate, Faults, Shared};

/// Bytes read per chunk.
const CHUNK: usize = 16 * 1024;
/// Chunks read but not yet written, per direction: enough to keep a
/// pipelining client's requests in flight under latency, small enough to push
/// back on a flood.
const IN_FLIGHT: usize = 256;
/// How long connecting to the upstream may take before the client is dropped.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Forwards `client` to the current upstream until either side closes or a
/// fault closes the connection.
pub(super) async fn serve(client: TcpStream, shared: Arc<Shared>) {
    let _open = shared.track();
    let mut faults = shared.faults.subscribe();
    let start = *faults.borrow_and_update();
    let closer = must_close(shared.faults.subscribe(), start);
    let forward = async {
        // During a stall or partition the upstream would not see the SYN
        // either: connect only once bytes may flow.
        if !wait_for_flow(&mut faults, &start).await {
            return;
        }
        let upstream = match timeout(CONNECT_TIMEOUT, TcpStream::connect(shared.upstream())).await {
            Ok(Ok(stream)) => stream,
            // Upstream down or unreachable: the client sees its connection close.
            _ => return,
        };
        // Redis replies are small; Nagle would add its own latency.
        let _ = upstream.set_nodelay(true);
        let _ = client.set_nodelay(true);
        let (client_read, client_write) = tokio::io::split(client);
        let (upstream_read, upstream_write) = tokio::io::split(upstream);
        tokio::select! {
            () = pipe(client_read, upstream_write, &shared, start, Direction::Request) => {}
            () = pipe(upstream_read, client_write, &shared, start, Direction::Reply) => {}
        }
    };
    // Biased, closer first: on a heal both wake in the same poll, and a connection that lived
    // through a partition must close before the forwarding half can read or send the bytes
    // the partition held back.
    tokio::select! {
        biased;
        () = closer => {}
        () = forward => {}
    }
}

/// Which way a pipe carries bytes; only replies can be cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Request,
    Reply,
}

/// Resolves when a fault requires this connection to close: a reset, refuse,
/// shutdown, or the end of a partition it lived through (its held-back bytes
/// are then dropped, as a real partition long enough to time out would).
async fn must_close(mut faults: watch::Receiver<Faults>, start: Faults) {
    loop {
        if faults.borrow_and_update().fate(&start) == Fate::Close {
            return;
        }
        if faults.changed().await.is_err() {
            return;
        }
    }
}

/// Waits until bytes may flow; `false` if the connection must close instead
/// (see [`Faults::fate`]).
async fn wait_for_flow(faults: &mut watch::Receiver<Faults>, start: &Faults) -> bool {
    loop {
        match faults.borrow_and_update().fate(start) {
            Fate::Flow => return true,
            Fate::Close => return false,
            Fate::Hold => {}
        }
        if faults.changed().await.is_err() {
            return false;
        }
    }
}

/// Copies `from` to `to` chunk by chunk. The reader stamps each chunk with
/// the time it is due (now + latency) and queues it, so latency delays every
/// chunk without serialising pipelined requests; the writer sends it when
/// due and bytes may flow. Returns when either side fails or, after the
/// reader sees EOF, once the queue is drained.
async fn pipe<R, W>(mut from: R, mut to: W, shared: &Shared, start: Faults, direction: Direction)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (queue, mut due) = mpsc::channel::<(Instant, Vec<u8>)>(IN_FLIGHT);
    let mut read_faults = shared.faults.subscribe();
    let mut write_faults = shared.faults.subscribe();
    let read = async move {
        let mut buf = vec![0_u8; CHUNK];
        loop {
            if !wait_for_flow(&mut read_faults, &start).await {
                return;
            }
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            let latency = read_faults.borrow().latency;
            if queue
                .send((Instant::now() + latency, buf[..n].to_vec()))
                .await
                .is_err()
            {
                return;
            }
        }
        // `queue` is dropped here, which lets the writer drain and finish.
    };
    let write = async move {
        while let Some((at, chunk)) = due.recv().await {
            sleep_until(at).await;
            if !wait_for_flow(&mut write_faults, &start).await {
                return;
            }
            let cut = match direction {
                Direction::Reply => shared.take_cut(),
                Direction::Request => None,
            };
            if let Some(keep) = cut {
                let _ = to.write_all(&chunk[..keep.min(chunk.len())]).await;
                let _ = to.shutdown().await;
                return;
            }
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = write => {}
        // The reader finishing is not the end: the writer drains what it queued.
        () = async { read.await; std::future::pending::<()>().await } => {}
    }
}
