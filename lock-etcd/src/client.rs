//! One etcd client per tokio runtime: the client's channels run tasks on the runtime that made
//! them, and one `EtcdLock` may serve several runtimes (every `#[tokio::test]` has its own). A
//! client whose runtime is gone is dropped at the next look-up. The client is built on
//! [`Members`], which sends each request to a member that answers.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use lock_core::backend::PerRuntime;
use lock_core::{LockError, Op, TimeoutPhase};
use tokio::runtime::Handle;
use tokio::sync::watch;
use tower::util::BoxCloneSyncService;

use crate::error::{backend, bounded};
use crate::members::{Members, Timing};

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
    made: PerRuntime<Connected>,
}

/// A runtime's client and the members under it.
#[derive(Clone)]
struct Connected {
    client: Client,
    members: Members,
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("runtimes", &self.made.len())
            .finish()
    }
}

impl Clients {
    /// The current runtime's client, made (and authenticated) if it has none.
    ///
    /// # Errors
    /// A `Connect` timeout, or [`LockError::Backend`] (not retryable for bad credentials or an
    /// endpoint this build cannot reach: `https://` needs TLS).
    ///
    /// # Cancel safety
    /// Cancel-safe: a client made by a cancelled call is dropped; the next call makes another.
    pub(crate) async fn get(&self, target: &Target) -> Result<Client, LockError> {
        Ok(self.connected(target).await?.client)
    }

    /// The current runtime's client, and a receiver that changes whenever its requests move
    /// to another member (the release watch follows them).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    ///
    /// # Cancel safety
    /// As [`get`](Self::get).
    pub(crate) async fn get_with_moves(
        &self,
        target: &Target,
    ) -> Result<(Client, watch::Receiver<usize>), LockError> {
        let connected = self.connected(target).await?;
        Ok((connected.client, connected.members.moves()))
    }

    async fn connected(&self, target: &Target) -> Result<Connected, LockError> {
        let runtime = Handle::current().id();
        if let Some(connected) = self.made.get(runtime, Connected::clone) {
            return Ok(connected);
        }
        let timing = Timing {
            connect: target.connect_timeout,
            command: target.command_timeout,
        };
        let members =
            Members::new(&target.endpoints, timing).map_err(|err| backend(Op::Connect, err))?;
        let channel = etcd_client::Channel::Custom(BoxCloneSyncService::new(members.clone()));
        // A member without a leader answers at once instead of holding the request.
        let mut options = ConnectOptions::new().with_require_leader(true);
        if let Some((user, password)) = &target.user {
            options = options.with_user(user.as_str(), password.as_str());
        }
        // Authenticating is the only request `from_channel` makes; without a user it sends
        // nothing.
        let client = bounded(
            Op::Connect,
            TimeoutPhase::Connect,
            target.connect_timeout,
            Client::from_channel(channel, Some(options)),
        )
        .await?;
        // Another task of this runtime may have connected meanwhile: the first client stays.
        Ok(self
            .made
            .insert(Connected { client, members }, Connected::clone))
    }
}
