//! What the `distlock serve` tests share: the server started as a process (its address read
//! from its first line on stderr, stopped by its PID), lock holders as other processes
//! (`distlock run`), and a small blocking HTTP/1.1 client.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `distlock serve` process, killed by its PID when dropped.
pub(crate) struct Serve {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
}

impl Serve {
    /// `distlock --url URLS serve --listen 127.0.0.1:0 ARGS...`, once it listens.
    pub(crate) fn start(urls: &[String], args: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_distlock"))
            .arg("--url")
            .arg(urls.join(","))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_PREFIX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start distlock serve");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the address, then drains stderr so the server never blocks on it.
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            let first = lines.next().and_then(Result::ok).unwrap_or_default();
            let _ = tx.send(first);
            for _ in lines {}
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("distlock serve printed its address");
        let addr = line
            .strip_prefix("distlock: serving on http://")
            .and_then(|rest| rest.strip_suffix('/'))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .parse()
            .expect("an address");
        Serve { child, addr }
    }

    /// SIGTERM, then its exit status (waited for 10 s at most; `None` past that).
    pub(crate) fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// The page's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// `GET path`, as the page would send it (Host: the address).
    pub(crate) fn get(&self, path: &str) -> Reply {
        request(self.addr, "GET", path, &[], None)
    }

    /// `GET path` as JSON (200 required).
    pub(crate) fn json(&self, path: &str) -> serde_json::Value {
        let reply = self.get(path);
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        serde_json::from_str(&reply.body).expect("JSON")
    }

    /// `/metrics`, parsed.
    pub(crate) fn metrics(&self) -> prometheus_parse::Scrape {
        let reply = self.get("/metrics");
        assert_eq!(reply.status, 200, "{}", reply.body);
        prometheus_parse::Scrape::parse(reply.body.lines().map(|l| Ok(l.to_owned())))
            .expect("the Prometheus text format")
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `distlock run` process holding a lock (its command sleeps), killed by its PID when dropped
/// (or sent SIGTERM by [`Holder::stop`], which releases the lock).
pub(crate) struct Holder {
    pub(crate) child: Child,
}

impl Holder {
    /// `distlock --url URLS run ARGS... -- sleep 600`, once its lock shows in `show`
    /// (`name`).
    pub(crate) fn start(urls: &[String], args: &[&str], name: &str) -> Holder {
        let child = Command::new(env!("CARGO_BIN_EXE_distlock"))
            .arg("--url")
            .arg(urls.join(","))
            .arg("run")
            .args(args)
            .args(["--", "sleep", "600"])
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_PREFIX")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start distlock run");
        let holder = Holder { child };
        let held = crate::common::eventually(Duration::from_secs(15), || {
            let doc = crate::common::distlock(urls, &["--json", "show", name]);
            doc.status.success()
                && serde_json::from_slice::<serde_json::Value>(&doc.stdout)
                    .is_ok_and(|d| !crate::common::locks(&d).is_empty())
        });
        assert!(held, "distlock run took {name}");
        holder
    }

    /// Its PID (the pid the holder's description carries).
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL by its PID: distlock dies holding the lock, which then runs out (with a
    /// `--lock-delay`, the delay after it).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the command ends and the lock is released; waits (bounded) for the exit.
    pub(crate) fn stop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid"));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP reply.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    /// Header names in lower case.
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: String,
}

/// One HTTP/1.1 request (`Connection: close`) to `addr`; `headers` may override `Host`.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to serve");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or_default();
    text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(text.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the reply");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a reply");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// The gauge `name` with labels `labels` in a scrape.
pub(crate) fn gauge(
    scrape: &prometheus_parse::Scrape,
    name: &str,
    labels: &[(&str, &str)],
) -> Option<f64> {
    scrape.samples.iter().find_map(|s| {
        let matches = s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v));
        match (matches, &s.value) {
            (true, prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Counter(v)) => {
                Some(*v)
            }
            (true, prometheus_parse::Value::Untyped(v)) => Some(*v),
            _ => None,
        }
    })
}
