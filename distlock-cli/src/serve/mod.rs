//! `distlock serve`: a web console, a JSON API and a Prometheus exporter of what the store
//! holds, on one small axum server.
//!
//! - `routes` (this file): the server, its routes and its response headers;
//! - [`snapshot`]: the one sweep of the store that serves every request, cached for
//!   `--refresh` and shared by concurrent requests;
//! - [`api`]: the JSON documents; [`metrics`]: the Prometheus text; [`page`]: the console;
//! - [`history`]: what the sweeps saw over the last `--history`;
//! - [`auth`]: who may read, see tokens and release.

mod api;
mod auth;
mod history;
mod metrics;
mod page;
mod snapshot;

use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::cli::ServeArgs;
use crate::exit::{BACKEND, Failure};
use crate::store::Store;

use self::api::Settings;
use self::auth::Auth;
use self::history::History;
use self::snapshot::Cache;

/// What every request shares.
#[derive(Debug)]
struct App {
    cache: Cache,
    /// What the sweeps saw over `--history`, told each sweep by the cache.
    history: Arc<std::sync::Mutex<History>>,
    auth: Auth,
    settings: Settings,
    csp: String,
}

/// Serves the console on `args.listen` until Ctrl-C or SIGTERM, then exits 0. The listening
/// address is printed on stderr first (`distlock: serving on http://ADDR/`).
///
/// # Errors
/// A usage failure for a non-loopback `--listen` without `--auth-token-file` or a bad token
/// file; a failure when the address cannot be bound. A failing store is not one: the page and
/// the metrics say so and the last good snapshot is kept.
///
/// # Cancel safety
/// Not meant to be cancelled: it returns at a signal, after the requests under way end.
pub(crate) async fn serve(store: Arc<dyn Store>, args: ServeArgs) -> Result<ExitCode, Failure> {
    if !args.listen.ip().is_loopback() && args.auth_token_file.is_none() {
        // Refused before binding: nothing is ever exposed without a token.
        Auth::new(args.listen, None)?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::new(BACKEND, format!("cannot listen on {}: {e}", args.listen)))?;
    let local = listener
        .local_addr()
        .map_err(|e| Failure::new(BACKEND, format!("cannot listen on {}: {e}", args.listen)))?;
    let auth = Auth::new(local, args.auth_token_file.as_deref())?;
    let millis = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let settings = Settings {
        backend: store.backend(),
        refresh_ms: millis(args.refresh),
        stuck_after_ms: millis(args.stuck_after),
        allow_release: args.allow_release,
        auth_required: auth.has_token(),
    };
    let history = Arc::new(std::sync::Mutex::new(History::new(
        args.history,
        args.refresh,
    )));
    let app = Arc::new(App {
        cache: Cache::new(store, args.pattern, args.scan, args.refresh, {
            let history = Arc::clone(&history);
            Box::new(move |snapshot| lock(&history).record(snapshot))
        }),
        history,
        auth,
        settings,
        csp: page::content_security_policy(),
    });
    let router = Router::new()
        .route("/", get(index))
        .route("/api/locks", get(locks))
        .route("/api/elections", get(elections))
        .route("/api/history", get(history_api))
        .route("/api/release", post(release))
        .route("/api/revoke", post(revoke))
        .route("/metrics", get(metrics_text))
        .layer(middleware::from_fn_with_state(app.clone(), headers))
        .with_state(Arc::clone(&app));
    // The history is of what the sweeps saw: one every --refresh, whether a page is open or
    // not (the load of one open page), until the server stops.
    let sweeper = tokio::spawn({
        let (app, refresh) = (Arc::clone(&app), args.refresh);
        async move {
            loop {
                app.cache.view().await;
                tokio::time::sleep(refresh).await;
            }
        }
    });
    eprintln!("distlock: serving on http://{local}/");
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(stopped())
        .await
        .map_err(|e| Failure::new(BACKEND, format!("the server failed: {e}")));
    sweeper.abort();
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Resolves at Ctrl-C (SIGINT) or SIGTERM (the library's `shutdown`).
async fn stopped() {
    lock_core::shutdown().await;
    eprintln!("distlock: stopping");
}

/// Headers on every response: the CSP (the page's own for `/`, none for the rest), no
/// sniffing, no framing, no referrer, no caching.
async fn headers(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let is_page = request.uri().path() == "/";
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let csp = if is_page {
        HeaderValue::from_str(&app.csp).ok()
    } else {
        Some(HeaderValue::from_static(page::API_CSP))
    };
    if let Some(csp) = csp {
        headers.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `/`: the page (static: it holds no data, the API is what is guarded).
async fn index() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page::HTML,
    )
        .into_response()
}

/// `/api/locks`.
async fn locks(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let access = match app.auth.read(&headers) {
        Ok(access) => access,
        Err(refused) => return refused,
    };
    let view = app.cache.view().await;
    axum::Json(api::locks(&view, app.settings, access)).into_response()
}

/// `/api/elections`.
async fn elections(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let access = match app.auth.read(&headers) {
        Ok(access) => access,
        Err(refused) => return refused,
    };
    let view = app.cache.view().await;
    axum::Json(api::elections(&view, app.settings, access)).into_response()
}

/// `/api/history`: what the sweeps saw over `--history` (holds and waiting lines).
async fn history_api(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.auth.read(&headers) {
        return refused;
    }
    let doc = lock(&app.history).doc(snapshot::now_ms());
    axum::Json(doc).into_response()
}

/// The history, locked (never across an await).
fn lock(history: &std::sync::Mutex<History>) -> std::sync::MutexGuard<'_, History> {
    history
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `/metrics`.
async fn metrics_text(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Err(refused) = app.auth.read(&headers) {
        return refused;
    }
    let view = app.cache.view().await;
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(&view),
    )
        .into_response()
}

/// The checks every write of the console passes, then its JSON body: the bearer token and the
/// origin (401, 403), `--allow-release` (403, saying `what` is off), and a JSON body of the
/// request's `shape` (400).
///
/// # Errors
/// The response refusing it, as above.
#[allow(clippy::result_large_err)] // The error is the response itself, built once.
fn write_request<T: serde::de::DeserializeOwned>(
    app: &App,
    headers: &HeaderMap,
    body: &[u8],
    (what, shape): (&str, &str),
) -> Result<T, Response> {
    app.auth.write(headers)?;
    if !app.settings.allow_release {
        return Err((
            StatusCode::FORBIDDEN,
            format!("{what} is off: start the server with --allow-release\n"),
        )
            .into_response());
    }
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    match serde_json::from_slice(body) {
        Ok(request) if is_json => Ok(request),
        _ => Err((
            StatusCode::BAD_REQUEST,
            format!("expected Content-Type: application/json and {shape}\n"),
        )
            .into_response()),
    }
}

/// The body of `POST /api/revoke`.
#[derive(Debug, Deserialize)]
struct RevokeRequest {
    name: String,
    #[serde(default)]
    note: Option<String>,
}

/// `POST /api/revoke` `{"name": ..., "note": ...}`: asks the holder of `name` to give it up
/// (`Locker::revoke`, as `distlock revoke`): nothing is taken from under its work, a revocable
/// holder (`distlock run`) is told at its next renewal. 200 `{"asked": true, "fencing_token":
/// T}`; 409 `{"asked": false}` when not held; the same 403, 401 and 400 as `POST /api/release`
/// (it needs `--allow-release`); 501 where the store cannot name a grant (Redlock, advisory
/// locks); 502 when the store fails.
async fn revoke(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: RevokeRequest = match write_request(
        &app,
        &headers,
        &body,
        ("revoking", r#"{"name": ..., "note": ...}"#),
    ) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    let asked = match crate::store::locker(app.cache.store(), None) {
        Ok(locker) => locker
            .revoke(&request.name, request.note.as_deref())
            .await
            .map_err(crate::exit::Failure::from),
        Err(failure) => Err(failure),
    };
    let refused = |status: StatusCode, reason: String| {
        (
            status,
            axum::Json(serde_json::json!({ "asked": false, "reason": reason })),
        )
            .into_response()
    };
    match asked {
        Ok(Some(token)) => {
            tracing::info!(name = %request.name, "revoked from the console");
            axum::Json(serde_json::json!({ "asked": true, "fencing_token": token })).into_response()
        }
        Ok(None) => refused(StatusCode::CONFLICT, "not held: nobody to ask".into()),
        Err(failure) if failure.code == crate::exit::USAGE => {
            refused(StatusCode::BAD_REQUEST, failure.message)
        }
        Err(failure) if failure.message.contains("does not offer") => {
            refused(StatusCode::NOT_IMPLEMENTED, failure.message)
        }
        Err(failure) => refused(StatusCode::BAD_GATEWAY, failure.message),
    }
}

/// The body of `POST /api/release`.
#[derive(Debug, Deserialize)]
struct ReleaseRequest {
    name: String,
    token: String,
}

/// `POST /api/release` `{"name": ..., "token": ...}`: releases `name` only if held with
/// `token` (`Store::release_token`, as `release --token`). 200 `{"released": true}`; 409
/// `{"released": false}` when held with another token or not held; 403 without
/// `--allow-release` or from another origin; 401 without the bearer token when one is set;
/// 400 for a bad body; 502 when the store fails.
async fn release(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let request: ReleaseRequest = match write_request(
        &app,
        &headers,
        &body,
        ("releasing", r#"{"name": ..., "token": ...}"#),
    ) {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    if request.token.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "the holder's token is required\n").into_response();
    }
    let released = app
        .cache
        .store()
        .release(&request.name, request.token.trim())
        .await;
    app.cache.invalidate().await;
    match released {
        Ok(true) => {
            tracing::info!(name = %request.name, "released from the console");
            axum::Json(serde_json::json!({ "released": true })).into_response()
        }
        Ok(false) => (
            StatusCode::CONFLICT,
            axum::Json(serde_json::json!({
                "released": false,
                "reason": "not held with this token (held by another holder, or not held)",
            })),
        )
            .into_response(),
        Err(failure) if failure.code == crate::exit::USAGE => (
            StatusCode::BAD_REQUEST,
            axum::Json(serde_json::json!({ "released": false, "reason": failure.message })),
        )
            .into_response(),
        Err(failure) => (
            StatusCode::BAD_GATEWAY,
            axum::Json(serde_json::json!({ "released": false, "reason": failure.message })),
        )
            .into_response(),
    }
}
