//! [`FakeS3`]: an in-process S3 look-alike that **ignores** `If-Match` and `If-None-Match`, as
//! some S3-compatible stores do. It exists for one test: lock-object-store's self-probe must
//! refuse such a store. Objects only (PUT, GET, HEAD, DELETE on `/{bucket}/{key}`), no
//! signatures checked, nothing on disk.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The objects: key → (bytes, ETag).
type Objects = Arc<Mutex<HashMap<String, (Bytes, String)>>>;

/// A running fake S3 server on a free loopback port; stopped when dropped.
#[derive(Debug)]
pub struct FakeS3 {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl FakeS3 {
    /// Starts it on a free loopback port, in the current tokio runtime.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let objects: Objects = Arc::default();
        let app = Router::new()
            .route("/{*key}", axum::routing::any(object))
            .with_state(objects);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, task })
    }

    /// Its endpoint, `http://127.0.0.1:<port>`.
    #[must_use]
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeS3 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request on an object: the conditions in `headers` are ignored on purpose.
async fn object(
    State(objects): State<Objects>,
    method: Method,
    Path(key): Path<String>,
    _headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut objects = objects.lock().unwrap_or_else(PoisonError::into_inner);
    match method {
        Method::PUT => {
            let etag = format!("\"{:016x}\"", fastrand::u64(..));
            objects.insert(key, (body, etag.clone()));
            respond(StatusCode::OK, Some(&etag), 0, Bytes::new())
        }
        Method::GET | Method::HEAD => match objects.get(&key) {
            Some((bytes, etag)) => {
                let body = if method == Method::GET {
                    bytes.clone()
                } else {
                    Bytes::new()
                };
                respond(StatusCode::OK, Some(etag), bytes.len(), body)
            }
            None => respond(StatusCode::NOT_FOUND, None, 0, Bytes::new()),
        },
        Method::DELETE => {
            objects.remove(&key);
            respond(StatusCode::NO_CONTENT, None, 0, Bytes::new())
        }
        _ => respond(StatusCode::METHOD_NOT_ALLOWED, None, 0, Bytes::new()),
    }
}

/// A response with the headers an S3 client reads (`ETag`, `Last-Modified`, the length).
fn respond(status: StatusCode, etag: Option<&str>, len: usize, body: Bytes) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    if let Some(etag) = etag.and_then(|e| HeaderValue::from_str(e).ok()) {
        headers.insert(header::ETAG, etag);
    }
    headers.insert(
        header::LAST_MODIFIED,
        HeaderValue::from_static("Sat, 01 Jan 2000 00:00:00 GMT"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    response
}
