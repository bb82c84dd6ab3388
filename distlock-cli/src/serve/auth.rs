//! Who may read and write through the server.
//!
//! The rules (the README's "Security"):
//! - Without `--auth-token-file` the server listens on a loopback address only (refused at
//!   start otherwise), and a request must name it in `Host` (`127.0.0.1:PORT`,
//!   `localhost:PORT`, `[::1]:PORT`), so a web page elsewhere cannot reach it by rebinding a
//!   DNS name to the loopback. Nobody is authenticated: holders' tokens are masked.
//! - With `--auth-token-file`, `/api/*` and `/metrics` require `Authorization: Bearer TOKEN`
//!   (compared in constant time); such a request is authenticated and sees tokens in full. The
//!   page itself (`/`, static, no data) is served to anyone and asks for the token.
//! - A POST needs the bearer token when there is one, else the same origin: `Origin` equal to
//!   `http://` + the (checked) `Host`, and `Sec-Fetch-Site`, when sent, `same-origin` — a page
//!   of another site cannot make a browser release a lock.
//!
//! Masked unless authenticated: with no token file the loopback's users are not told tokens
//! either, so the page never offers a one-click release of whoever holds a lock: a release
//! needs the holder's token typed in, as `distlock release --token` does.

use std::net::SocketAddr;
use std::path::Path;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::exit::{Failure, USAGE};

/// The shortest bearer token accepted (bytes): guessing one must be hopeless.
const MIN_TOKEN_LEN: usize = 16;

/// The server's access rules.
#[derive(Debug)]
pub(crate) struct Auth {
    token: Option<Vec<u8>>,
    hosts: Vec<String>,
}

/// What a request may see.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    /// It carried the bearer token: tokens are shown in full.
    pub(crate) authenticated: bool,
}

impl Auth {
    /// The rules for a server on `local` (its bound address), with the bearer token read from
    /// `token_file` if given.
    ///
    /// # Errors
    /// A usage failure when `local` is not a loopback address and there is no token file, or
    /// when the file cannot be read or holds a token shorter than 16 bytes.
    pub(crate) fn new(local: SocketAddr, token_file: Option<&Path>) -> Result<Self, Failure> {
        let token = token_file.map(read_token).transpose()?;
        if token.is_none() && !local.ip().is_loopback() {
            return Err(Failure::new(
                USAGE,
                format!(
                    "--listen {local} is not a loopback address: give --auth-token-file FILE \
                     (a bearer token the API and /metrics then require)"
                ),
            ));
        }
        let port = local.port();
        let hosts = vec![
            local.to_string(),
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        Ok(Self { token, hosts })
    }

    /// Whether a bearer token is required.
    pub(crate) fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// A read (`GET /api/*`, `/metrics`): with a token file, the bearer token; without, a
    /// loopback `Host`.
    ///
    /// # Errors
    /// The response refusing it: 401 without the right bearer token, 403 for another host.
    #[allow(clippy::result_large_err)] // The error is the response itself, built once.
    pub(crate) fn read(&self, headers: &HeaderMap) -> Result<Access, Response> {
        match &self.token {
            Some(token) => {
                if bearer(headers).is_some_and(|given| bool::from(given.ct_eq(token))) {
                    Ok(Access {
                        authenticated: true,
                    })
                } else {
                    Err((
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, "Bearer")],
                        "a bearer token is required (Authorization: Bearer TOKEN)\n",
                    )
                        .into_response())
                }
            }
            None => {
                self.host(headers)?;
                Ok(Access {
                    authenticated: false,
                })
            }
        }
    }

    /// A write (`POST /api/release`): the bearer token, or without a token file the page's
    /// own origin.
    ///
    /// # Errors
    /// The response refusing it: 401 without the right bearer token, 403 from another origin.
    #[allow(clippy::result_large_err)] // The error is the response itself, built once.
    pub(crate) fn write(&self, headers: &HeaderMap) -> Result<Access, Response> {
        let access = self.read(headers)?;
        if self.token.is_some() {
            return Ok(access);
        }
        let host = self.host(headers)?;
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
        let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
        let same_origin = origin == Some(format!("http://{host}").as_str())
            && site.is_none_or(|s| s == "same-origin");
        if same_origin {
            Ok(access)
        } else {
            Err(forbidden(
                "a POST must come from this server's own page (Origin) or carry the bearer token\n",
            ))
        }
    }

    /// The request's `Host`, if it is one of this server's loopback names.
    #[allow(clippy::result_large_err)]
    fn host<'a>(&self, headers: &'a HeaderMap) -> Result<&'a str, Response> {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            Ok(host)
        } else {
            Err(forbidden(
                "unknown Host: open the console at the address it listens on\n",
            ))
        }
    }
}

/// 403 with a one-line reason.
fn forbidden(why: &'static str) -> Response {
    (StatusCode::FORBIDDEN, why).into_response()
}

/// The token of `Authorization: Bearer TOKEN`.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let scheme = value.get(..7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| value.get(7..))
        .flatten()
        .map(<[u8]>::trim_ascii)
}

/// The token in `path`, without surrounding whitespace.
fn read_token(path: &Path) -> Result<Vec<u8>, Failure> {
    let text = std::fs::read(path)
        .map_err(|e| Failure::new(USAGE, format!("--auth-token-file {}: {e}", path.display())))?;
    let token = text.trim_ascii().to_vec();
    if token.len() < MIN_TOKEN_LEN {
        return Err(Failure::new(
            USAGE,
            format!(
                "--auth-token-file {}: the token must be at least {MIN_TOKEN_LEN} bytes",
                path.display()
            ),
        ));
    }
    Ok(token)
}

/// A holder's token as shown to a request that is not authenticated: its first 7 characters
/// (`dl:` and 4 hex digits, enough to tell holders apart), then `…`.
pub(crate) fn mask(token: &str) -> String {
    let shown: String = token.chars().take(7).collect();
    if shown.len() < token.len() {
        format!("{shown}…")
    } else {
        "…".to_owned()
    }
}
