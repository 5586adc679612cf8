//! The executor's accept loop, with `http_server`'s time-outs (`axum::serve` has none):
//! a request's headers and body must arrive within `read_timeout_seconds`, its answer
//! must be ready within `write_timeout_seconds` (else 504), and a kept-alive connection
//! with nothing in flight is closed after `idle_timeout_seconds`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

/// Bodies the executor takes at most (a long conversation with its tool results).
const MAX_BODY: usize = 32 << 20;

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub read: Duration,
    pub write: Duration,
    pub idle: Duration,
}

impl Timeouts {
    pub fn of(h: &crate::config::HttpServerSection) -> Self {
        let secs = |s: f64| Duration::from_secs_f64(s.max(0.001));
        Timeouts {
            read: secs(h.read_timeout_seconds),
            write: secs(h.write_timeout_seconds),
            idle: secs(h.idle_timeout_seconds),
        }
    }
}

fn refusal(status: StatusCode, code: &str, message: String) -> Response {
    let body =
        serde_json::json!({"error": {"message": message, "type": "server_error", "code": code}});
    (status, axum::Json(body)).into_response()
}

/// Reads the body within `read` (a client that drips it is answered 408) and answers
/// within `write` (504), whatever the handler does.
pub async fn deadlines(t: Timeouts, req: Request, next: axum::middleware::Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match tokio::time::timeout(t.read, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!("cannot read the body: {e}"),
            )
        }
        Err(_) => {
            return refusal(
                StatusCode::REQUEST_TIMEOUT,
                "read_timeout",
                format!(
                "the request body did not arrive within {} s (http_server.read_timeout_seconds)",
                t.read.as_secs_f64()
            ),
            )
        }
    };
    let req = Request::from_parts(parts, Body::from(bytes));
    match tokio::time::timeout(t.write, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => refusal(
            StatusCode::GATEWAY_TIMEOUT,
            "write_timeout",
            format!(
                "no answer within {} s (http_server.write_timeout_seconds)",
                t.write.as_secs_f64()
            ),
        ),
    }
}

/// Serves `app` until `stop` is cancelled; connections then finish their request.
pub async fn serve(listener: TcpListener, app: Router, t: Timeouts, stop: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        tracker.spawn(serve_connection(stream, app.clone(), t, stop.clone()));
    }
    tracker.close();
    tracker.wait().await;
}

async fn serve_connection(stream: TcpStream, app: Router, t: Timeouts, stop: CancellationToken) {
    // Requests in flight and when the last one ended, for the idle time-out.
    let busy = Arc::new(AtomicUsize::new(0));
    let origin = Instant::now();
    let last_ms = Arc::new(AtomicU64::new(0));
    let svc = {
        let (busy, last_ms) = (busy.clone(), last_ms.clone());
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let mut app = app.clone();
            let (busy, last_ms) = (busy.clone(), last_ms.clone());
            busy.fetch_add(1, Ordering::SeqCst);
            async move {
                let resp = app.call(req).await.unwrap_or_else(|e| match e {});
                last_ms.store(origin.elapsed().as_millis() as u64, Ordering::SeqCst);
                busy.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Infallible>(resp)
            }
        })
    };
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(t.read)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    let idle = async {
        loop {
            let since = origin
                .elapsed()
                .saturating_sub(Duration::from_millis(last_ms.load(Ordering::SeqCst)));
            if busy.load(Ordering::SeqCst) == 0 && since >= t.idle {
                return;
            }
            tokio::time::sleep(t.idle.saturating_sub(since).max(Duration::from_millis(50))).await;
        }
    };
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = idle => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
