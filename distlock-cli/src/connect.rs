//! Reaching Redis: a first connection that tells whether the URLs answer (and whether they are
//! a Redis Cluster's or a Sentinel's), then a `RedisLock` built from the same URLs, through
//! which every read (lock-redis's own operator reads) and change goes.

use std::time::Duration;

use lock_redis::{RedisLock, RedisLockBuilder};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo};

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::tls::Tls;

/// The server that answered first: where it is and a connection to it.
pub(crate) struct Node {
    /// `host:port`, for messages.
    pub(crate) addr: String,
    conn: MultiplexedConnection,
}

/// The deployment behind the URLs.
pub(crate) struct Target {
    /// The server that answered (the master a sentinel names, a cluster's first node).
    pub(crate) node: Node,
    /// Whether it is a Redis Cluster.
    pub(crate) cluster: bool,
    /// The library's lock on it, with the prefix, timeouts and TLS settings given: every read
    /// and change goes through it.
    pub(crate) lock: RedisLock,
    place: Place,
}

impl Target {
    /// Connects to the first URL that answers (a sentinel's master when the URLs are
    /// sentinels'), tells whether it is a Redis Cluster, and builds the lock on it.
    ///
    /// # Errors
    /// A usage failure for a URL that does not parse; a backend failure when no URL answers
    /// (refused, timed out, wrong password), naming the address, on one line.
    pub(crate) async fn connect(args: &TargetArgs) -> Result<Self, Failure> {
        let mut infos = Vec::with_capacity(args.url.len());
        for url in &args.url {
            // The URL is not echoed: it may hold a password.
            let info = url
                .as_str()
                .into_connection_info()
                .map_err(|e| Failure::new(USAGE, format!("invalid Redis URL: {}", one_line(&e))))?;
            infos.push(info);
        }
        let tls = Tls::load(args)?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(args.connect_timeout))
            .set_response_timeout(Some(args.command_timeout));
        #[cfg(feature = "sentinel")]
        let sentinel_master = args.sentinel_master.clone();
        #[cfg(not(feature = "sentinel"))]
        let sentinel_master: Option<String> = None;
        let mut last = None;
        for info in &infos {
            if let Some(master) = &sentinel_master {
                match sentinel_master_node(info, master, &tls, &config, args.connect_timeout).await
                {
                    Ok(node) => {
                        return Self::around(args, node, false, sentinel_master, tls);
                    }
                    Err(failure) => {
                        last = Some(failure);
                        continue;
                    }
                }
            }
            match open(info, &tls, &config, args.connect_timeout).await {
                Ok(node) => {
                    let cluster = cluster_enabled(&node).await?;
                    return Self::around(args, node, cluster, None, tls);
                }
                Err(failure) => last = Some(failure),
            }
        }
        Err(last.unwrap_or_else(|| Failure::new(USAGE, "no Redis URL given")))
    }

    /// The target around `node`, the server that answered, with its lock.
    fn around(
        args: &TargetArgs,
        node: Node,
        cluster: bool,
        sentinel_master: Option<String>,
        tls: Tls,
    ) -> Result<Self, Failure> {
        let place = Place {
            cluster,
            prefix: args.prefix.clone().unwrap_or_default(),
            sentinel_master,
            tls,
            command_timeout: args.command_timeout,
            urls: args.url.clone(),
            connect_timeout: args.connect_timeout,
        };
        Ok(Self {
            node,
            cluster,
            lock: place.lock_with(RedisLock::builder())?,
            place,
        })
    }

    /// A `RedisLock` on the same deployment, with the same prefix and timeouts, from `builder`
    /// (say, one that describes its holders).
    pub(crate) fn lock_with(&self, builder: RedisLockBuilder) -> Result<RedisLock, Failure> {
        self.place.lock_with(builder)
    }
}

/// Where the URLs lead and how to reach it, for the locks built on it.
struct Place {
    cluster: bool,
    prefix: String,
    /// The master's name when the URLs are sentinels'.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    sentinel_master: Option<String>,
    /// TLS settings, for every connection.
    tls: Tls,
    command_timeout: Duration,
    urls: Vec<String>,
    connect_timeout: Duration,
}

impl Place {
    /// A `RedisLock` on the deployment, with the prefix and timeouts given, from `builder`.
    fn lock_with(&self, builder: RedisLockBuilder) -> Result<RedisLock, Failure> {
        let builder = self
            .tls
            .apply(builder)
            .prefix(self.prefix.clone())
            .connect_timeout(self.connect_timeout)
            .command_timeout(self.command_timeout);
        #[cfg(feature = "sentinel")]
        if let Some(master) = &self.sentinel_master {
            return Ok(builder
                .sentinel(self.urls.iter().cloned(), master.clone())
                .build()?);
        }
        #[cfg(feature = "cluster")]
        let builder = if self.cluster {
            builder.cluster_urls(self.urls.iter().cloned())
        } else {
            builder.url(self.urls[0].clone())
        };
        #[cfg(not(feature = "cluster"))]
        let builder = if self.cluster {
            return Err(Failure::new(
                USAGE,
                "this is a Redis Cluster: build distlock with the `cluster` feature",
            ));
        } else {
            builder.url(self.urls[0].clone())
        };
        Ok(builder.build()?)
    }
}

/// What a failed connection says: the client's error, or, when the server answered in another
/// protocol than Redis's, that (the library's [`lock_redis::NotRedis`]), not a parse error.
fn said(error: redis::RedisError) -> String {
    match lock_redis::NotRedis::from_error(error) {
        Ok(not_redis) => not_redis.to_string(),
        Err(error) => error.to_string(),
    }
}

/// Connects to one node, checks it answers (and accepts the credentials) with `PING`.
async fn open(
    info: &ConnectionInfo,
    tls: &Tls,
    config: &AsyncConnectionConfig,
    limit: Duration,
) -> Result<Node, Failure> {
    let addr = info.addr().to_string();
    let fail =
        |e: &dyn std::fmt::Display| Failure::backend(&format!("cannot connect to {addr}"), e);
    let client = tls.client(info.clone()).map_err(|e| fail(&e))?;
    let connecting = client.get_multiplexed_async_connection_with_config(config);
    let mut conn = match tokio::time::timeout(limit, connecting).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(fail(&said(e))),
        Err(_) => {
            return Err(fail(&format!(
                "no answer within {}",
                humantime::format_duration(limit)
            )));
        }
    };
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(|e| fail(&said(e)))?;
    Ok(Node { addr, conn })
}

/// The master that the sentinel at `sentinel` names `master`, connected to without
/// credentials (as redis-rs's sentinel client does for `RedisLockBuilder::sentinel`).
async fn sentinel_master_node(
    sentinel: &ConnectionInfo,
    master: &str,
    tls: &Tls,
    config: &AsyncConnectionConfig,
    limit: Duration,
) -> Result<Node, Failure> {
    let asked = open(sentinel, tls, config, limit).await?;
    let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(master)
        .query_async(&mut asked.conn.clone())
        .await
        .map_err(|e| Failure::backend(&format!("asking the sentinel {}", asked.addr), &e))?;
    let Some((host, port)) = addr else {
        return Err(Failure::new(
            BACKEND,
            format!("the sentinel {} knows no master {master:?}", asked.addr),
        ));
    };
    let addr = node_addr(sentinel.addr(), host, port);
    let info = format!("redis://{addr}/")
        .into_connection_info()
        .map_err(|e| Failure::backend("the master's address", &e))?
        .set_addr(addr);
    open(&info, tls, config, limit).await
}

/// Whether the node runs in cluster mode (`INFO cluster`).
async fn cluster_enabled(node: &Node) -> Result<bool, Failure> {
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut node.conn.clone())
        .await
        .map_err(|e| Failure::backend(&format!("INFO on {}", node.addr), &e))?;
    Ok(info.lines().any(|l| l.trim() == "cluster_enabled:1"))
}

/// `host:port` reached like `like`: over TLS, with its settings, if `like` is.
fn node_addr(like: &ConnectionAddr, host: String, port: u16) -> ConnectionAddr {
    match like {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    }
}
