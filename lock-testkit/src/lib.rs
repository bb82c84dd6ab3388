#![forbid(unsafe_code)]
//! Throwaway `redis-server` processes for distlock's integration tests.
//!
//! Every test starts the servers it needs with [`RedisServer::start`] (or
//! [`RedisServer::builder`]): each one listens on a free port on
//! `127.0.0.1`, keeps its data and log in its own temporary directory, and is
//! killed by its own PID (`SIGKILL`, then reaped) when it is dropped. Servers
//! can be stopped, started again on the same port, restarted with or without
//! their data, and paused/resumed with `SIGSTOP`/`SIGCONT` to simulate a hung
//! node. Every wait is bounded in both attempts and time.
//!
//! The binary is taken from `DISTLOCK_REDIS_SERVER` if set, else from `PATH`
//! (see [`redis_server_binary`]); `scripts/ensure-redis.sh` installs it.
//!
//! ```no_run
//! use lock_testkit::{KeepData, RedisServer};
//!
//! let mut server = RedisServer::start()?;
//! assert_eq!(server.command(&["PING"])?, "PONG");
//! server.command(&["SET", "k", "v"])?;
//! server.restart(KeepData::Keep)?;
//! assert_eq!(server.command(&["GET", "k"])?, "v");
//!
//! let secured = RedisServer::builder().password("s3cret").start()?;
//! let client = redis::Client::open(secured.url());
//! # drop(client);
//! # Ok::<(), std::io::Error>(())
//! ```

mod binary;
mod client;
mod port;
mod probe;
mod server;
mod signal;

pub use binary::{redis_server_binary, try_redis_server_binary};
pub use port::free_port;
pub use server::{KeepData, RedisServer, RedisServerBuilder};
