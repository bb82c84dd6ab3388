//! One etcd client per tokio runtime: the client's channel runs tasks on the runtime that made
//! it, and one `EtcdLock` may serve several runtimes (every `#[tokio::test]` has its own). A
//! client whose runtime is gone is dropped at the next look-up.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use lock_core::backend::PerRuntime;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::runtime::Handle;

use crate::error::bounded;

/// What a client is made from.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) endpoints: Vec<String>,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) user: Option<(String, String)>,
}

/// The clients made so far, by runtime.
#[derive(Default)]
pub(crate) struct Clients {
    made: PerRuntime<Client>,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("runtimes", &self.made.len())
            .finish()
    }
}

impl Clients {
    /// The current runtime's client, connected (and authenticated) if it has none.
    ///
    /// # Errors
    /// A `Connect` timeout, or [`LockError::Backend`] (not retryable for bad credentials).
    pub(crate) async fn get(&self, target: &Target) -> Result<Client, LockError> {
        let runtime = Handle::current().id();
        if let Some(client) = self.made.get(runtime, Client::clone) {
            return Ok(client);
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(target.connect_timeout)
            .with_timeout(target.command_timeout)
            // A member without a leader answers at once instead of holding the request.
            .with_require_leader(true)
            .with_keep_alive(target.command_timeout, target.command_timeout);
        if let Some((user, password)) = &target.user {
            options = options.with_user(user.as_str(), password.as_str());
        }
        // Authenticating is the only request `connect` makes; without a user it sends nothing.
        let client = bounded(
            Op::Connect,
            TimeoutPhase::Connect,
            target.connect_timeout,
            Client::connect(&target.endpoints, Some(options)),
        )
        .await?;
        // Another task of this runtime may have connected meanwhile: the first client stays.
        Ok(self.made.insert(client, Client::clone))
    }
}
