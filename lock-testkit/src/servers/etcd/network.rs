//! [`EtcdNetwork`]: where an [`EtcdCluster`](super::EtcdCluster)'s members listen, in network
//! namespaces of their own (partitionable, privileged) or on loopback (unprivileged); and
//! [`Net`], the network a cluster holds, which places each member and refuses a partition on
//! loopback.

use std::io;
use std::net::Ipv4Addr;
use std::sync::OnceLock;

use super::netns::Network;
use crate::servers::port::try_free_port;

/// The client port every member in a namespace listens on, each on its own address.
const CLIENT_PORT: u16 = 2379;
/// The peer port every member in a namespace listens on, each on its own address.
const PEER_PORT: u16 = 2380;

/// Where the members of an [`EtcdCluster`](super::EtcdCluster) listen; see
/// [`EtcdClusterBuilder::network`](super::EtcdClusterBuilder::network).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EtcdNetwork {
    /// [`Namespaces`](Self::Namespaces) when this process may make them, else
    /// [`Loopback`](Self::Loopback): only when making the network is refused for want of
    /// privileges (no root, nor CAP_NET_ADMIN and CAP_SYS_ADMIN) or iproute2's `ip` is
    /// missing; any other failure is an error. The default: the tests, which run as root,
    /// keep their two-way partition, and a non-root user still gets a cluster (whose
    /// [`partition`](super::EtcdCluster::partition) fails, saying why).
    #[default]
    Auto,
    /// Each member in a Linux network namespace of its own on a private bridge
    /// (`10.213.S.<i+1>`, ports 2379 and 2380), so that
    /// [`partition`](super::EtcdCluster::partition) cuts it both ways. Needs root (or
    /// CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2; `start` fails without them. For tests
    /// that partition and want to fail at the start.
    Namespaces,
    /// Every member on `127.0.0.1` with a client and a peer port of its own
    /// ([`free_port`](crate::free_port)'s cross-process claims), started directly: no
    /// privilege, no namespace, bridge or link made on the machine, even as root.
    /// [`partition`](super::EtcdCluster::partition) and [`heal`](super::EtcdCluster::heal)
    /// answer [`io::ErrorKind::Unsupported`]. For a throwaway etcd that is never
    /// partitioned: demos, examples, load runs.
    Loopback,
}

/// Where one member listens, and the namespace it runs in (if any).
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub(super) addr: Ipv4Addr,
    pub(super) client_port: u16,
    pub(super) peer_port: u16,
    pub(super) namespace: Option<Namespace>,
}

/// A network namespace a member is started in (`ip netns exec <name> etcd ...`).
#[derive(Debug, Clone)]
pub(super) struct Namespace {
    pub(super) name: String,
    /// iproute2's `ip`.
    pub(super) ip: std::path::PathBuf,
}

/// The network a cluster's members live on (dropped after the members).
#[derive(Debug)]
pub(super) enum Net {
    /// A namespace per member on a bridge; removed on drop.
    Namespaces(Network),
    /// Plain loopback ports; `why` says why no namespaces were used (for `partition`'s error).
    Loopback { why: String },
}

impl Net {
    /// The network for a cluster of `members` members, as `mode` asks.
    ///
    /// # Errors
    /// [`EtcdNetwork::Namespaces`]: what [`Network::create`] says (`PermissionDenied`,
    /// `NotFound` saying what is missing). [`EtcdNetwork::Auto`]: the same, except these two,
    /// for which it falls back to loopback.
    pub(super) fn create(mode: EtcdNetwork, members: usize) -> io::Result<Net> {
        // Once refused, not asked again: the privileges of a process do not come back, and
        // each attempt runs a handful of `ip` commands.
        static UNAVAILABLE: OnceLock<String> = OnceLock::new();
        match mode {
            EtcdNetwork::Namespaces => Network::create(members).map(Net::Namespaces),
            EtcdNetwork::Loopback => Ok(Net::Loopback {
                why: "it was built with EtcdNetwork::Loopback".to_owned(),
            }),
            EtcdNetwork::Auto => {
                if let Some(why) = UNAVAILABLE.get() {
                    return Ok(Net::Loopback { why: why.clone() });
                }
                match Network::create(members) {
                    Ok(network) => Ok(Net::Namespaces(network)),
                    Err(err)
                        if matches!(
                            err.kind(),
                            io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
                        ) =>
                    {
                        let why = format!("network namespaces are unavailable here: {err}");
                        if UNAVAILABLE.set(why.clone()).is_ok() {
                            // Once per process: a test that goes on to partition fails anyway,
                            // and this says beforehand why.
                            eprintln!(
                                "lock-testkit: etcd clusters run on 127.0.0.1 without \
                                 partitions ({why})"
                            );
                        }
                        Ok(Net::Loopback { why })
                    }
                    Err(err) => Err(err),
                }
            }
        }
    }

    /// Which of the two it is (never [`EtcdNetwork::Auto`]).
    pub(super) fn kind(&self) -> EtcdNetwork {
        match self {
            Net::Namespaces(_) => EtcdNetwork::Namespaces,
            Net::Loopback { .. } => EtcdNetwork::Loopback,
        }
    }

    /// Where member `i` listens: its namespace's address with the fixed ports, or loopback
    /// with two fresh free ports (claimed for this process's life, so kept across restarts).
    ///
    /// # Errors
    /// When no free port is found.
    pub(super) fn place(&self, i: usize) -> io::Result<Place> {
        Ok(match self {
            Net::Namespaces(network) => Place {
                addr: network.addr(i),
                client_port: CLIENT_PORT,
                peer_port: PEER_PORT,
                namespace: Some(Namespace {
                    name: network.namespace(i).to_owned(),
                    ip: network.ip_binary().to_owned(),
                }),
            },
            Net::Loopback { .. } => Place {
                addr: Ipv4Addr::LOCALHOST,
                client_port: try_free_port()?,
                peer_port: try_free_port()?,
                namespace: None,
            },
        })
    }

    /// Takes member `i` (named `name`) off the network (`up == false`) or puts it back.
    ///
    /// # Errors
    /// [`io::ErrorKind::Unsupported`] on loopback, saying what a partition needs and why it
    /// is missing; when `ip link set` fails.
    pub(super) fn set_link(&self, i: usize, name: &str, up: bool) -> io::Result<()> {
        match self {
            Net::Namespaces(network) => network.set_link(i, up),
            Net::Loopback { why } => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "cannot {} etcd member {name}: its cluster runs on loopback (127.0.0.1), \
                     where no two-way partition can be made. A partition needs each member in a \
                     network namespace of its own (EtcdNetwork::Namespaces), which needs root \
                     (or CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2's `ip`; this cluster has \
                     none because {why}",
                    if up { "heal" } else { "partition" }
                ),
            )),
        }
    }
}
