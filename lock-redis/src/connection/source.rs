//! Where Redis is: the builder's connection settings (a URL, a pool, a cluster, sentinels, the
//! pub/sub URL, TLS), checked and turned into the pool the lock commands go through and the
//! origin of the release subscriber's connection. The builder (`config.rs`) gathers them; the
//! assembly (`settings.rs`) never sees them.

use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use lock_core::LockError;

use crate::connection::conn::Source;
use crate::feeds::subscriber::Origin;

/// Where the lock connects, as the builder was told.
#[derive(Default)]
pub(crate) struct SourceSettings {
    pub(crate) url: Option<String>,
    pub(crate) pool: Option<Pool>,
    #[cfg(feature = "cluster")]
    pub(crate) cluster_urls: Option<Vec<String>>,
    #[cfg(feature = "cluster")]
    pub(crate) cluster_pool: Option<deadpool_redis::cluster::Pool>,
    #[cfg(feature = "sentinel")]
    pub(crate) sentinel: Option<(Vec<String>, String)>,
    pub(crate) pubsub_url: Option<String>,
    #[cfg(feature = "tls")]
    pub(crate) tls: crate::connection::tls::TlsSettings,
}

/// The connection source made from [`SourceSettings`].
pub(crate) struct Opened {
    /// The pool lock commands go through.
    pub(crate) source: Source,
    /// Where the release subscriber connects, when that is known.
    pub(crate) pubsub: Option<Origin>,
    /// The server's label in logs and metrics.
    pub(crate) server: String,
}

/// The sources given so far, and the subscriber's origin and server label of the last one.
struct Chosen {
    sources: Vec<Source>,
    pubsub: Option<Origin>,
    server: String,
}

impl SourceSettings {
    /// The one source given, its pool made (no connection yet).
    ///
    /// # Errors
    /// [`LockError::InvalidInput`] when neither or several sources were given, a URL does not
    /// parse, a pool cannot be made, or TLS settings were given without a URL to apply them to.
    pub(crate) fn open(
        self,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<Opened, LockError> {
        #[cfg(feature = "tls")]
        crate::connection::tls::ensure_crypto_provider(); // also for a `pool` of yours over rediss://
        let mut chosen = Chosen {
            sources: Vec::new(),
            pubsub: None,
            server: String::from("pool"),
        };
        self.single(&mut chosen, connect_timeout)?;
        #[cfg(feature = "cluster")]
        self.cluster(&mut chosen, connect_timeout, command_timeout)?;
        #[cfg(feature = "sentinel")]
        self.sentinel(&mut chosen, connect_timeout, command_timeout)?;
        let _ = command_timeout; // used by the cluster and sentinel features only
        #[cfg(feature = "tls")]
        if !self.tls.is_empty() && self.url.is_none() && self.pubsub_url.is_none() {
            // Cluster and sentinel clients take their TLS settings elsewhere; silently
            // ignoring a CA would connect with the system trust store instead.
            return Err(LockError::invalid(
                "TLS certificates apply to a url or pubsub_url; cluster and sentinel \
                 connections verify rediss:// against the system trust store",
            ));
        }
        if chosen.sources.len() != 1 {
            return Err(LockError::invalid(if chosen.sources.is_empty() {
                "a RedisLock needs a URL, a pool, cluster URLs or sentinels"
            } else {
                "give a RedisLock one of: a URL, a pool, a cluster, sentinels"
            }));
        }
        Ok(Opened {
            source: chosen.sources.remove(0),
            pubsub: chosen.pubsub,
            server: chosen.server,
        })
    }

    /// The URL's connection details, through the TLS settings where the feature is on.
    fn connection_info(&self, url: &str) -> Result<redis::ConnectionInfo, LockError> {
        #[cfg(feature = "tls")]
        {
            self.tls.connection_info(url)
        }
        #[cfg(not(feature = "tls"))]
        {
            plain_connection_info(url)
        }
    }

    /// The subscriber's client for `url`.
    fn pubsub_client(&self, url: &str) -> Result<Origin, LockError> {
        redis::Client::open(self.connection_info(url)?)
            .map(Origin::Client)
            .map_err(|e| LockError::invalid(format!("bad pub/sub URL: {e}")))
    }

    /// A URL or a pool of one server.
    fn single(&self, chosen: &mut Chosen, connect_timeout: Duration) -> Result<(), LockError> {
        if let Some(url) = &self.url {
            let target = self.connection_info(url)?;
            chosen.server = target.addr().to_string();
            chosen
                .sources
                .push(Source::Single(pool_from(target, connect_timeout)?));
            chosen.pubsub = Some(self.pubsub_client(self.pubsub_url.as_deref().unwrap_or(url))?);
        }
        if let Some(pool) = &self.pool {
            chosen.sources.push(Source::Single(pool.clone()));
            chosen.pubsub = self
                .pubsub_url
                .as_deref()
                .map(|url| self.pubsub_client(url))
                .transpose()?;
        }
        Ok(())
    }

    /// A cluster, by its pool or its node URLs.
    #[cfg(feature = "cluster")]
    fn cluster(
        &self,
        chosen: &mut Chosen,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<(), LockError> {
        match (&self.cluster_pool, &self.cluster_urls) {
            (Some(pool), urls) => {
                chosen.sources.push(Source::Cluster(pool.clone()));
                chosen.pubsub = urls.clone().map(Origin::Cluster);
            }
            (None, Some(urls)) => {
                chosen.sources.push(Source::Cluster(cluster_pool(
                    urls,
                    connect_timeout,
                    command_timeout,
                )?));
                chosen.pubsub = Some(Origin::Cluster(urls.clone()));
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// The master that sentinels name.
    #[cfg(feature = "sentinel")]
    fn sentinel(
        &self,
        chosen: &mut Chosen,
        connect_timeout: Duration,
        command_timeout: Duration,
    ) -> Result<(), LockError> {
        let Some((urls, master)) = &self.sentinel else {
            return Ok(());
        };
        chosen.server = format!("sentinel:{master}");
        chosen.sources.push(Source::Sentinel(sentinel_pool(
            urls,
            master,
            connect_timeout,
            command_timeout,
        )?));
        let client = redis::sentinel::SentinelClient::build(
            urls.clone(),
            master.clone(),
            None,
            redis::sentinel::SentinelServerType::Master,
        )
        .map_err(|e| LockError::invalid(format!("bad sentinel URLs: {e}")))?;
        chosen.pubsub = Some(Origin::Sentinel(client));
        Ok(())
    }
}

/// Without the `tls` feature a URL is only parsed; `rediss://` gets a hint at the feature.
#[cfg(not(feature = "tls"))]
fn plain_connection_info(url: &str) -> Result<redis::ConnectionInfo, LockError> {
    redis::IntoConnectionInfo::into_connection_info(url).map_err(|e| {
        let hint = if url.starts_with("rediss://") {
            " (rediss:// needs the `tls` feature)"
        } else {
            ""
        };
        LockError::invalid(format!("bad Redis URL: {e}{hint}"))
    })
}

fn pool_from(target: redis::ConnectionInfo, connect_timeout: Duration) -> Result<Pool, LockError> {
    // redis-rs has timeouts of its own (1 s to connect, 500 ms per reply). Connecting uses ours;
    // replies are bounded by the timeout `RedisLock` puts around every command (which also
    // replaces a hung connection), so redis-rs's would only be a second timer per command.
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(None);
    let manager = Manager::new_with_config(target, config)
        .map_err(|e| LockError::invalid(format!("bad Redis URL: {e}")))?;
    Pool::builder(manager)
        .max_size(4)
        .runtime(Runtime::Tokio1)
        .build()
        .map_err(|e| LockError::invalid(format!("cannot make a pool: {e}")))
}

#[cfg(feature = "cluster")]
fn cluster_pool(
    urls: &[String],
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<deadpool_redis::cluster::Pool, LockError> {
    let mut config = deadpool_redis::cluster::Config::from_urls(urls.to_vec());
    config.pool = Some(deadpool_redis::PoolConfig::new(4));
    let _ = (connect_timeout, command_timeout); // bounded by our own timeouts around each call
    config
        .create_pool(Some(Runtime::Tokio1))
        .map_err(|e| LockError::invalid(format!("cannot make a cluster pool: {e}")))
}

#[cfg(feature = "sentinel")]
fn sentinel_pool(
    urls: &[String],
    master: &str,
    connect_timeout: Duration,
    command_timeout: Duration,
) -> Result<deadpool_redis::sentinel::Pool, LockError> {
    let mut config = deadpool_redis::sentinel::Config::from_urls(
        urls.to_vec(),
        master.to_owned(),
        deadpool_redis::sentinel::SentinelServerType::Master,
    );
    config.pool = Some(deadpool_redis::PoolConfig::new(4));
    let _ = (connect_timeout, command_timeout); // bounded by our own timeouts around each call
    config
        .create_pool(Some(Runtime::Tokio1))
        .map_err(|e| LockError::invalid(format!("cannot make a sentinel pool: {e}")))
}
