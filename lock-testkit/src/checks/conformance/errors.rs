//! The same mistake gives the same typed error on every backend: a store that is not there
//! (a refused port) is told apart from one that does not answer (a silent port), and a server
//! of another kind answering is named as a failure, never waited on and never a panic. (Bad
//! names and TTLs are [`mutex::bad_input_sends_nothing`](super::mutex::bad_input_sends_nothing).)
//!
//! A Redlock answers [`LockError::QuorumNotReached`] where a single store answers `Backend` or
//! `Timeout`: no quorum of nodes could grant, and the nodes' own errors are its source (they
//! are the same as a single store's, which the checks read there).
//!
//! A store that needs something installed or made before its first lock (PostgreSQL's and
//! MySQL's lease tables: `distlock migrate`; an object store's bucket) and lacks it answers a
//! [`LockError::Backend`] that is not retryable and names the remedy
//! ([`Backend::with_unprepared`]).
//!
//! Credentials the store refuses are a [`LockError::Backend`] that is not retryable and says so
//! ([`Backend::with_wrong_credentials`], where the runner's store checks credentials).
//!
//! A runner gives the suite a way to point its backend at any address
//! ([`Backend::with_address`]); the checks make the addresses: a port nobody listens on, a
//! listener that accepts and never answers, and one that answers in HTTP and hangs up. A
//! backend with no network between it and its store (`MemoryLock`) has no such mistakes to
//! make: its runner gives no address, and the checks say so and pass.

use std::error::Error as _;
use std::net::SocketAddr;
use std::time::Duration;

use lock_core::{LockError, Locker};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::{Backend, name};

/// How long a check waits for the backend's answer at most: a backend given short timeouts by
/// its runner (a second or two) answers well within it.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// The whole chain of an error's messages, lower-cased.
fn chain(error: &LockError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text.to_lowercase()
}

/// One try of a mutex on `locker`, answered within [`ANSWER_WITHIN`].
async fn try_once(locker: &Locker, name: &str) -> Result<(), LockError> {
    let attempt = locker.lock(name).try_acquire();
    match tokio::time::timeout(ANSWER_WITHIN, attempt).await {
        Ok(answer) => answer.map(drop),
        Err(_) => panic!("{name}: no answer within {ANSWER_WITHIN:?}: the backend hangs"),
    }
}

/// The backend pointed at `addr`, or `None` when the runner gives no address (a backend with
/// no network).
fn at(backend: &Backend, addr: SocketAddr) -> Option<Locker> {
    backend.locker_at(addr)
}

/// A port on loopback that nobody listens on (bound, then closed).
async fn refused_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    drop(listener);
    addr
}

/// A try on a port nobody listens on fails with [`LockError::Backend`] saying the connection
/// was refused: not a timeout (nothing to wait for), not a panic.
pub async fn refused_port_is_told(backend: &Backend, prefix: &str) {
    let addr = refused_port().await;
    let Some(locker) = at(backend, addr) else {
        return;
    };
    let name = name(prefix, "refused");
    match try_once(&locker, &name).await {
        Err(error @ (LockError::Backend { .. } | LockError::QuorumNotReached { .. })) => {
            let text = chain(&error);
            assert!(
                text.contains("refused"),
                "a refused connection is not told as refused: {text}"
            );
        }
        other => panic!("a refused port answered {other:?}, not a backend error"),
    }
}

/// A try on a port that accepts connections and never answers fails with
/// [`LockError::Timeout`] (the backend's connect or command timeout), told apart from a refused
/// port.
pub async fn silent_port_is_a_timeout(backend: &Backend, prefix: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    let Some(locker) = at(backend, addr) else {
        return;
    };
    // Accepts and keeps every connection open, saying nothing, until the check ends.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let name = name(prefix, "silent");
    let answer = try_once(&locker, &name).await;
    silent.abort();
    match answer {
        Err(LockError::Timeout { .. }) => {}
        Err(error @ LockError::QuorumNotReached { .. }) => {
            let text = chain(&error);
            assert!(
                text.contains("timed out") || text.contains("timeout"),
                "no Redlock node is told as timed out: {text}"
            );
        }
        other => panic!("a silent port answered {other:?}, not a timeout"),
    }
}

/// A try on a port where an HTTP server answers (and hangs up) fails with
/// [`LockError::Backend`] at once: the backend does not wait on a server of another kind.
pub async fn another_kind_of_server_is_a_backend_error(backend: &Backend, prefix: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("an address");
    let Some(locker) = at(backend, addr) else {
        return;
    };
    let http = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                let _ = socket.shutdown().await;
            });
        }
    });
    let name = name(prefix, "other-kind");
    let answer = try_once(&locker, &name).await;
    http.abort();
    assert!(
        matches!(
            answer,
            Err(LockError::Backend { .. } | LockError::QuorumNotReached { .. })
        ),
        "a server of another kind answered {answer:?}, not a backend error"
    );
}

/// A try on a store that lacks what it needs (a schema never migrated, a bucket never made)
/// fails at once with a [`LockError::Backend`] that is not retryable (waiting will not help) and
/// whose message names the remedy: `migrate` or the bucket.
pub async fn unprepared_store_names_the_remedy(backend: &Backend, prefix: &str) {
    let Some(locker) = backend.unprepared_locker() else {
        return;
    };
    let answer = try_once(&locker, &name(prefix, "unprepared")).await;
    assert_permanent(answer, "an unprepared store", &["migrate", "bucket"]);
}

/// A try with credentials the store refuses fails at once with a [`LockError::Backend`] that
/// is not retryable (trying again with the same secret will not help) and says the
/// credentials were refused.
pub async fn wrong_credentials_are_told(backend: &Backend, prefix: &str) {
    let Some(locker) = backend.wrong_credentials_locker() else {
        return;
    };
    let answer = try_once(&locker, &name(prefix, "credentials")).await;
    let words = [
        "password",
        "credential",
        "access denied",
        "authentication",
        "signature",
    ];
    assert_permanent(answer, "refused credentials", &words);
}

/// `answer` (to `what`) is a [`LockError::Backend`] that is not retryable and whose messages
/// say one of `words`.
fn assert_permanent(answer: Result<(), LockError>, what: &str, words: &[&str]) {
    match answer {
        Err(error @ LockError::Backend { retryable, .. }) => {
            let text = chain(&error);
            assert!(!retryable, "{what}: retryable: {text}");
            assert!(
                words.iter().any(|word| text.contains(word)),
                "{what}: the error says none of {words:?}: {text}"
            );
        }
        other => panic!("{what} answered {other:?}, not a backend error"),
    }
}
