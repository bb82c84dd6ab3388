//! [`EtcdLockBuilder`]: where the cluster is, the key prefix, the timeouts and the credentials;
//! [`EtcdLock`]'s constructors, and the assembly of its shared state.

use std::sync::Arc;
use std::time::Duration;

use lock_core::LockError;

use crate::client::Target;
use crate::etcd_lock::EtcdLock;
use crate::executor::Executor;
use crate::watch::Watches;

/// How long connecting to an endpoint (and authenticating) may take by default.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one request (a transaction, an etcd lease grant, a keep-alive) may wait for its answer
/// by default.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(2);
/// The prefix of every lock key by default: the lock `order:42` is the key
/// `distlock/order:42`.
pub const DEFAULT_PREFIX: &str = "distlock/";

impl EtcdLock {
    /// A builder: endpoints, key prefix, timeouts, credentials.
    pub fn builder() -> EtcdLockBuilder {
        EtcdLockBuilder::default()
    }

    /// A lock on the cluster whose members' client URLs are `endpoints`
    /// (`http://host:port`), with the default prefix and timeouts.
    ///
    /// # Errors
    /// As [`EtcdLockBuilder::build`]: [`LockError::InvalidInput`] for no endpoint or a
    /// malformed one.
    pub fn new<I, S>(endpoints: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::builder().endpoints(endpoints).build()
    }
}

/// Configures an [`EtcdLock`]; see [`EtcdLock::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct EtcdLockBuilder {
    pub(crate) endpoints: Vec<String>,
    pub(crate) prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) user: Option<(String, String)>,
}

impl Default for EtcdLockBuilder {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            command_timeout: DEFAULT_OPERATION_TIMEOUT,
            user: None,
        }
    }
}

impl EtcdLockBuilder {
    /// Adds one member's client URL: `http://host:port` (or `host:port`). Give every member
    /// of the cluster: requests go to one that answers.
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoints.push(url.into());
        self
    }

    /// Adds several members' client URLs; see [`endpoint`](Self::endpoint).
    pub fn endpoints<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.endpoints.extend(urls.into_iter().map(Into::into));
        self
    }

    /// The prefix put before every lock name to make its key (default [`DEFAULT_PREFIX`]).
    /// Lockers that must exclude each other use the same prefix; releases are watched under
    /// it.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long connecting (and authenticating) may take (default
    /// [`DEFAULT_CONNECT_TIMEOUT`]); past it an operation fails with a `Connect` timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one request may wait for its answer (default [`DEFAULT_OPERATION_TIMEOUT`]);
    /// past it the operation fails with a `Command` timeout (the request may still have been
    /// applied). A cluster without a quorum answers at once with an error instead: requests
    /// carry etcd's `require leader` flag.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Authenticates as `user` with `password` (etcd's auth must be enabled on the cluster,
    /// and the user's role must allow reads and writes under the prefix).
    pub fn user(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((user.into(), password.into()));
        self
    }

    /// Checks the settings and makes the lock. Connects nothing: the first operation on each
    /// tokio runtime connects (within the connect timeout).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when no endpoint is given, an endpoint is not an
    /// `http://` / `https://` URL or `host:port`, or a timeout is zero.
    pub fn build(self) -> Result<EtcdLock, LockError> {
        if self.endpoints.is_empty() {
            return Err(LockError::invalid(
                "an etcd lock needs at least one endpoint",
            ));
        }
        for endpoint in &self.endpoints {
            check_endpoint(endpoint)?;
        }
        if self.connect_timeout.is_zero() || self.command_timeout.is_zero() {
            return Err(LockError::invalid(
                "etcd timeouts must be greater than zero",
            ));
        }
        Ok(EtcdLock::from_executor(Executor {
            prefix: self.prefix,
            target: Arc::new(Target {
                endpoints: self.endpoints,
                connect_timeout: self.connect_timeout,
                command_timeout: self.command_timeout,
                user: self.user,
            }),
            clients: Arc::default(),
            shared: crate::shared_lease::SharedLeases::default(),
            fixed: crate::fixed_lease::FixedLeases::default(),
            watches: Watches::default(),
        }))
    }
}

/// `http://host:port`, `https://host:port` or `host:port`, with a port that is a number.
fn check_endpoint(endpoint: &str) -> Result<(), LockError> {
    let bad = |why: &str| LockError::invalid(format!("etcd endpoint {endpoint:?}: {why}"));
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
        .unwrap_or(endpoint);
    if rest.contains("://") {
        return Err(bad("the scheme must be http:// or https://"));
    }
    let authority = rest.trim_end_matches('/');
    if let Some((_, path)) = authority.split_once('/') {
        return Err(bad(&format!(
            "an endpoint has no path (/{path}); the key prefix is `EtcdLockBuilder::prefix`"
        )));
    }
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| bad("expected host:port"))?;
    if host.is_empty() || host.contains('/') {
        return Err(bad("expected host:port"));
    }
    port.parse::<u16>()
        .map_err(|_| bad("the port is not a number from 0 to 65535"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        for good in ["http://127.0.0.1:2379", "https://etcd:2379/", "etcd-0:2379"] {
            assert!(check_endpoint(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "etcd",
            "redis://x:1",
            "http://:2379",
            "http://x:port",
            "x:99999",
            "http://127.0.0.1:12379/some/path",
        ] {
            assert!(
                matches!(check_endpoint(bad), Err(LockError::InvalidInput { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn build_needs_an_endpoint_and_timeouts() {
        assert!(EtcdLockBuilder::default().build().is_err());
        assert!(
            EtcdLockBuilder::default()
                .endpoint("http://127.0.0.1:2379")
                .command_timeout(Duration::ZERO)
                .build()
                .is_err()
        );
        assert!(
            EtcdLockBuilder::default()
                .endpoint("http://127.0.0.1:2379")
                .build()
                .is_ok()
        );
    }
}
