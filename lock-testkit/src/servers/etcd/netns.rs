//! [`Network`]: the private network an [`EtcdCluster`](super::EtcdCluster)'s members live on,
//! one Linux network namespace per member, so that a partition cuts a member both ways.
//!
//! Why namespaces: etcd cannot choose the source address of the connections it opens to its
//! peers, so a loopback proxy cannot tell which member connects, and a proxy-made partition
//! is one-way (a partitioned leader still reached its followers through its own pipeline
//! connections). A member in a namespace of its own with one link to the others is cut both
//! ways by taking that link down.
//!
//! Layout of cluster subnet `S` (`10.213.S.0/24`, claimed across processes like a port): a
//! bridge `dl<pid>s<SS>br` in the root namespace holding `10.213.S.254` (where the test
//! process and its clients speak from); member `i` in namespace `distlock-<pid>-s<SS>-m<i>`,
//! at `10.213.S.<i+1>` on its `eth0`, whose other end `dl<pid>s<SS>m<i>` is a port of the
//! bridge. `<pid>` is the test process's, `<SS>` the subnet in two hex digits.

use std::fs::{self, File};
use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The first two octets of every cluster's subnet.
const NET: [u8; 2] = [10, 213];
/// The root namespace's address on a cluster's bridge: `10.213.S.254`.
const HOST: u8 = 254;
/// At most this many members (addresses `.1` to `.100`; two-digit interface suffixes).
pub(super) const MAX_MEMBERS: usize = 100;
/// What the kit's namespaces are called before `-<pid>-...`.
const NS_PREFIX: &str = "distlock-";

/// A cluster's bridge and its members' namespaces and links, all removed on drop.
#[derive(Debug)]
pub(super) struct Network {
    ip: PathBuf,
    subnet: u8,
    bridge: String,
    nodes: Vec<Node>,
    /// The cross-process claim on `subnet`, released (after the removal) on drop.
    _claim: Flock<File>,
}

/// One member's namespace and the bridge-side end of its link.
#[derive(Debug)]
struct Node {
    ns: String,
    link: String,
}

impl Network {
    /// Sweeps the leftovers of dead test processes, claims a free subnet, and makes a bridge
    /// and `members` namespaces linked to it (every link up).
    ///
    /// # Errors
    /// [`io::ErrorKind::PermissionDenied`] without root (CAP_NET_ADMIN and CAP_SYS_ADMIN),
    /// [`io::ErrorKind::NotFound`] without iproute2's `ip`, each saying what is missing;
    /// [`io::ErrorKind::AddrNotAvailable`] when every subnet is claimed; otherwise the failing
    /// `ip` command and what it said. What was made before the error is removed.
    pub(super) fn create(members: usize) -> io::Result<Network> {
        if members > MAX_MEMBERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("an etcd cluster has at most {MAX_MEMBERS} members"),
            ));
        }
        let ip = ip_binary()?;
        sweep_dead(&ip);
        let (subnet, claim) = claim_subnet()?;
        // Whoever used this subnet before is gone (it held the claim while it lived).
        remove_subnet_leftovers(&ip, subnet);
        let pid = std::process::id();
        let mut network = Network {
            ip,
            subnet,
            bridge: format!("dl{pid}s{subnet:02x}br"),
            nodes: Vec::with_capacity(members),
            _claim: claim,
        };
        network.make_bridge().map_err(explain_privileges)?;
        for i in 0..members {
            network.add_node(i)?;
        }
        Ok(network)
    }

    /// Member `i`'s address.
    pub(super) fn addr(&self, i: usize) -> Ipv4Addr {
        let host = u8::try_from(i + 1).expect("at most MAX_MEMBERS members");
        Ipv4Addr::new(NET[0], NET[1], self.subnet, host)
    }

    /// Member `i`'s namespace (for `ip netns exec`).
    pub(super) fn namespace(&self, i: usize) -> &str {
        &self.nodes[i].ns
    }

    /// The `ip` executable.
    pub(super) fn ip_binary(&self) -> &Path {
        &self.ip
    }

    /// Takes member `i`'s link to the bridge down (`false`: every packet to and from it is
    /// dropped, both ways, for peers and clients alike) or up again (`true`). Connections
    /// that lived through a cut go on where they stopped, if neither end gave up meanwhile.
    ///
    /// # Errors
    /// When `ip link set` fails.
    pub(super) fn set_link(&self, i: usize, up: bool) -> io::Result<()> {
        let state = if up { "up" } else { "down" };
        ip(&self.ip, &["link", "set", &self.nodes[i].link, state])
    }

    fn make_bridge(&self) -> io::Result<()> {
        let host = format!("{}/24", Ipv4Addr::new(NET[0], NET[1], self.subnet, HOST));
        ip(&self.ip, &["link", "add", &self.bridge, "type", "bridge"])?;
        ip(&self.ip, &["addr", "add", &host, "dev", &self.bridge])?;
        ip(&self.ip, &["link", "set", &self.bridge, "up"])
    }

    fn add_node(&mut self, i: usize) -> io::Result<()> {
        let pid = std::process::id();
        let node = Node {
            ns: format!("{NS_PREFIX}{pid}-s{:02x}-m{i}", self.subnet),
            link: format!("dl{pid}s{:02x}m{i}", self.subnet),
        };
        // Made in the root namespace under a unique name, then moved and renamed `eth0`.
        let peer = format!("dl{pid}s{:02x}p{i}", self.subnet);
        let addr = format!("{}/24", self.addr(i));
        ip(&self.ip, &["netns", "add", &node.ns]).map_err(explain_privileges)?;
        let (ns, link) = (node.ns.clone(), node.link.clone());
        // From here on, drop removes it whatever fails next.
        self.nodes.push(node);
        let ip_in = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            ip(&self.ip, &all)
        };
        ip(
            &self.ip,
            &["link", "add", &link, "type", "veth", "peer", "name", &peer],
        )?;
        ip(&self.ip, &["link", "set", &peer, "netns", &ns])?;
        ip(&self.ip, &["link", "set", &link, "master", &self.bridge])?;
        ip(&self.ip, &["link", "set", &link, "up"])?;
        ip_in(&["link", "set", &peer, "name", "eth0"])?;
        ip_in(&["addr", "add", &addr, "dev", "eth0"])?;
        ip_in(&["link", "set", "eth0", "up"])?;
        ip_in(&["link", "set", "lo", "up"])
    }
}

impl Drop for Network {
    /// Removes the links, namespaces and bridge (the members' processes are stopped before:
    /// the cluster drops them first). Failures are ignored: the next sweep retries.
    fn drop(&mut self) {
        for node in &self.nodes {
            // Deleting one end of a veth pair deletes both.
            let _ = ip(&self.ip, &["link", "del", &node.link]);
            kill_namespace_processes(&self.ip, &node.ns);
            let _ = ip(&self.ip, &["netns", "del", &node.ns]);
        }
        let _ = ip(&self.ip, &["link", "del", &self.bridge]);
    }
}

/// iproute2's `ip`: on `PATH`, else in `/usr/sbin` or `/sbin` (not always on a user's `PATH`).
fn ip_binary() -> io::Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join("ip"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "EtcdCluster runs each etcd member in a network namespace of its own and needs \
                 iproute2's `ip` (not found on PATH, /usr/sbin or /sbin): install iproute2",
            )
        })
}

/// Runs `ip args` and waits for it (`ip` does not wait on the network); the error names the
/// command and carries what it printed.
fn ip(binary: &Path, args: &[&str]) -> io::Result<()> {
    let out = Command::new(binary).args(args).output()?;
    if out.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    let kind = if said.contains("Operation not permitted") || said.contains("Permission denied") {
        io::ErrorKind::PermissionDenied
    } else {
        io::ErrorKind::Other
    };
    Err(io::Error::new(
        kind,
        format!("`ip {}` failed ({}): {said}", args.join(" "), out.status),
    ))
}

/// `ip args`'s standard output, empty when it fails.
fn ip_output(binary: &Path, args: &[&str]) -> String {
    Command::new(binary)
        .args(args)
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

/// Says what is missing when the first privileged `ip` call is refused.
fn explain_privileges(err: io::Error) -> io::Error {
    if err.kind() != io::ErrorKind::PermissionDenied {
        return err;
    }
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "EtcdCluster runs each etcd member in a network namespace of its own (so that a \
             partition cuts both ways), which needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN, \
             and iproute2; this process lacks them: {err}"
        ),
    )
}

/// Claims a subnet id for this cluster until the claim is dropped: an exclusive `flock` on
/// `$TMPDIR/distlock-ports/subnet-<S>`, as [`free_port`](crate::free_port) claims ports (the
/// kernel drops it when the process ends, however it ends). Starts at an id drawn from the
/// PID, so that concurrent test processes rarely try the same ones.
fn claim_subnet() -> io::Result<(u8, Flock<File>)> {
    let dir = std::env::temp_dir().join("distlock-ports");
    fs::create_dir_all(&dir)?;
    let start = std::process::id() as usize;
    for offset in 0..=usize::from(u8::MAX) {
        let subnet = u8::try_from((start + offset) % 256).expect("taken modulo 256");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("subnet-{subnet}")))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(claim) => return Ok((subnet, claim)),
            Err((_, Errno::EWOULDBLOCK)) => {}
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrNotAvailable,
        "every subnet 10.213.0.0/24 to 10.213.255.0/24 is claimed by a live etcd cluster",
    ))
}

/// The PID a kit-made link (`dl<pid>s...`) or namespace (`distlock-<pid>-...`) carries.
fn owner(name: &str) -> Option<u32> {
    let rest = name
        .strip_prefix(NS_PREFIX)
        .or_else(|| name.strip_prefix("dl"))?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let after = rest[digits.len()..].chars().next();
    if !matches!(after, Some('-' | 's')) {
        return None;
    }
    digits.parse().ok()
}

/// The subnet (`s<SS>`) a kit-made name carries.
fn subnet_of(name: &str) -> Option<u8> {
    let (_, rest) = name.split_once('s')?;
    let rest = if name.starts_with(NS_PREFIX) {
        // `distlock-<pid>-s<SS>-m<i>`: the first `s` is in "distlock".
        name.split('-').nth(2)?.strip_prefix('s')?
    } else {
        rest
    };
    u8::from_str_radix(rest.get(..2)?, 16).ok()
}

fn is_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// The kit's links in the root namespace (`ip -o link show`: `N: name[@peer]: <...`).
fn kit_links(ip: &Path) -> Vec<String> {
    ip_output(ip, &["-o", "link", "show"])
        .lines()
        .filter_map(|line| line.split(": ").nth(1))
        .map(|name| name.split('@').next().unwrap_or(name).to_owned())
        .filter(|name| owner(name).is_some())
        .collect()
}

/// The kit's namespaces (`ip netns list`: `name (id: N)` or `name`).
fn kit_namespaces(ip: &Path) -> Vec<String> {
    ip_output(ip, &["netns", "list"])
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(NS_PREFIX) && owner(name).is_some())
        .map(str::to_owned)
        .collect()
}

/// `SIGKILL`s, by PID, the processes left in namespace `ns` (an etcd that outlived the test
/// process that started it).
fn kill_namespace_processes(ip: &Path, ns: &str) {
    for pid in ip_output(ip, &["netns", "pids", ns]).split_whitespace() {
        if let Ok(pid) = pid.parse::<i32>() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

fn remove(ip: &Path, links: &[String], namespaces: &[String]) {
    for link in links {
        let _ = self::ip(ip, &["link", "del", link]);
    }
    for ns in namespaces {
        kill_namespace_processes(ip, ns);
        let _ = self::ip(ip, &["netns", "del", ns]);
    }
}

/// Removes the links and namespaces of test processes that are gone (best effort).
fn sweep_dead(ip: &Path) {
    let dead = |name: &String| owner(name).is_some_and(|pid| !is_alive(pid));
    let links: Vec<String> = kit_links(ip).into_iter().filter(dead).collect();
    let namespaces: Vec<String> = kit_namespaces(ip).into_iter().filter(dead).collect();
    remove(ip, &links, &namespaces);
}

/// Removes whatever another process left on `subnet`, just claimed: whoever made it no
/// longer holds the claim (a PID reused since would hide it from [`sweep_dead`]).
fn remove_subnet_leftovers(ip: &Path, subnet: u8) {
    let ours = |name: &String| subnet_of(name) == Some(subnet);
    let links: Vec<String> = kit_links(ip).into_iter().filter(ours).collect();
    let namespaces: Vec<String> = kit_namespaces(ip).into_iter().filter(ours).collect();
    remove(ip, &links, &namespaces);
}

#[cfg(test)]
mod tests {
    use super::{owner, subnet_of};

    #[test]
    fn names_carry_their_pid_and_subnet() {
        assert_eq!(owner("dl4194304s0abr"), Some(4_194_304));
        assert_eq!(subnet_of("dl4194304s0abr"), Some(0x0a));
        assert_eq!(owner("dl12sffm3"), Some(12));
        assert_eq!(subnet_of("dl12sffm3"), Some(0xff));
        assert_eq!(owner("distlock-77-s10-m0"), Some(77));
        assert_eq!(subnet_of("distlock-77-s10-m0"), Some(0x10));
        assert_eq!(owner("docker0"), None);
        assert_eq!(owner("dlfoo"), None);
        assert_eq!(owner("distlock-x"), None);
    }
}
