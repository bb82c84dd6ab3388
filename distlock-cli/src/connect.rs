//! Reaching Redis: plain connections to every master for reading (SCAN and friends), and a
//! `RedisLock` for what changes a lock (release, run), built from the same URLs.

use std::time::Duration;

use lock_redis::{RedisLock, RedisLockBuilder};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};

use crate::cli::TargetArgs;
use crate::exit::{BACKEND, Failure, USAGE, one_line};
use crate::tls::Tls;

/// One master: where it is and a connection to it. Every key of a lock lives on one master
/// (they share a hash slot), so a lock is read from a single node.
#[derive(Clone)]
pub(crate) struct Node {
    /// `host:port`, for messages.
    pub(crate) addr: String,
    pub(crate) conn: MultiplexedConnection,
    /// The hash slots it serves, as inclusive ranges (empty for a single server).
    pub(crate) slots: Vec<SlotRange>,
    /// How to connect again (`watch` opens a pub/sub connection).
    pub(crate) info: ConnectionInfo,
}

/// First and last hash slot of a range a master serves.
pub(crate) type SlotRange = (i64, i64);

/// The deployment behind the URLs.
pub(crate) struct Target {
    /// Every master (one for a single server).
    pub(crate) nodes: Vec<Node>,
    /// Whether it is a Redis Cluster: release channels are sharded there (`SHARDNUMSUB`).
    pub(crate) cluster: bool,
    pub(crate) prefix: String,
    pub(crate) command_timeout: Duration,
    /// The master's name when the URLs are sentinels'.
    #[cfg_attr(not(feature = "sentinel"), allow(dead_code))]
    sentinel_master: Option<String>,
    /// TLS settings, for every connection.
    pub(crate) tls: Tls,
    urls: Vec<String>,
    connect_timeout: Duration,
}

impl Target {
    /// Connects to the first URL that answers and, on a cluster, to every master.
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
                        return Ok(Self {
                            nodes: vec![node],
                            cluster: false,
                            prefix: args.prefix.clone().unwrap_or_default(),
                            sentinel_master,
                            tls,
                            command_timeout: args.command_timeout,
                            urls: args.url.clone(),
                            connect_timeout: args.connect_timeout,
                        });
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
                    let nodes = if cluster {
                        masters(&node, info, &tls, &config, args.connect_timeout).await?
                    } else {
                        vec![node]
                    };
                    return Ok(Self {
                        nodes,
                        cluster,
                        prefix: args.prefix.clone().unwrap_or_default(),
                        sentinel_master: None,
                        tls,
                        command_timeout: args.command_timeout,
                        urls: args.url.clone(),
                        connect_timeout: args.connect_timeout,
                    });
                }
                Err(failure) => last = Some(failure),
            }
        }
        Err(last.unwrap_or_else(|| Failure::new(USAGE, "no Redis URL given")))
    }

    /// A `RedisLock` on the same deployment, with the same prefix and timeouts, from `builder`
    /// (say, one that describes its holders).
    pub(crate) fn lock_with(&self, builder: RedisLockBuilder) -> Result<RedisLock, Failure> {
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

    /// The Redis key of the lock `name`.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The master that holds `key` (its hash slot's, on a cluster).
    pub(crate) fn node_for(&self, key: &str) -> Result<&Node, Failure> {
        if !self.cluster {
            return Ok(&self.nodes[0]);
        }
        let slot = i64::from(lock_redis::key_slot(key));
        self.nodes
            .iter()
            .find(|n| n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .ok_or_else(|| Failure::new(BACKEND, format!("no master serves slot {slot}")))
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
    Ok(Node {
        addr,
        conn,
        slots: Vec::new(),
        info: info.clone(),
    })
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

/// Connections to every master of the cluster `seed` belongs to (from `CLUSTER SLOTS`), with
/// the seed's credentials, database and TLS settings.
async fn masters(
    seed: &Node,
    seed_info: &ConnectionInfo,
    tls: &Tls,
    config: &AsyncConnectionConfig,
    limit: Duration,
) -> Result<Vec<Node>, Failure> {
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut seed.conn.clone())
        .await
        .map_err(|e| Failure::backend(&format!("CLUSTER SLOTS on {}", seed.addr), &e))?;
    let mut addrs: Vec<(String, u16, Vec<SlotRange>)> = Vec::new();
    for range in &ranges {
        let Some((start, end, master)) = slot_range(range) else {
            continue;
        };
        let Some((host, port)) = master.rsplit_once(':') else {
            continue;
        };
        let host = if host.is_empty() {
            seed.addr.rsplit_once(':').map_or("", |(h, _)| h).to_owned()
        } else {
            host.to_owned()
        };
        if let Ok(port) = port.parse::<u16>() {
            match addrs.iter_mut().find(|(h, p, _)| *h == host && *p == port) {
                Some((_, _, slots)) => slots.push((start, end)),
                None => addrs.push((host, port, vec![(start, end)])),
            }
        }
    }
    if addrs.is_empty() {
        return Err(Failure::new(
            BACKEND,
            format!("{}: the cluster has no slots assigned", seed.addr),
        ));
    }
    let mut nodes = Vec::with_capacity(addrs.len());
    for (host, port, slots) in addrs {
        let addr = node_addr(seed_info.addr(), host, port);
        let mut node = open(&seed_info.clone().set_addr(addr), tls, config, limit).await?;
        node.slots = slots;
        nodes.push(node);
    }
    Ok(nodes)
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

/// One row of `CLUSTER SLOTS`: first slot, last slot, and the master's `host:port`.
fn slot_range(range: &Value) -> Option<(i64, i64, String)> {
    let Value::Array(parts) = range else {
        return None;
    };
    let (Value::Int(start), Value::Int(end), Value::Array(master)) =
        (parts.first()?, parts.get(1)?, parts.get(2)?)
    else {
        return None;
    };
    let host = match master.first()? {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        _ => return None,
    };
    let Value::Int(port) = master.get(1)? else {
        return None;
    };
    Some((*start, *end, format!("{host}:{port}")))
}
