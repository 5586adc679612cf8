//! The accept loop. `axum::serve` has no caps and no header time-out, so a few hundred
//! clients that open connections and drip their headers (slowloris) would hold them for
//! ever; here every connection needs a place under `gateway.limits.max_connections`
//! (in total and per address) and must send its headers within
//! `header_read_timeout_seconds`. Bodies are bounded in time by `http::guard`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

use crate::conn_limit::{ConnLimiter, LimitHit};

/// How long an over-cap client gets to take its 503 before the socket is dropped.
const REFUSAL_WRITE: Duration = Duration::from_secs(1);
/// Pause after a failed accept (out of file descriptors, say) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

pub struct Limits {
    pub connections: ConnLimiter,
    pub header_read_timeout: Duration,
}

/// Serves `app` until `stop` is cancelled, then lets every connection finish its
/// current request (idle ones close at once) and returns when they are gone.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, stop: CancellationToken) {
    let tracker = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let permit = match limits.connections.try_acquire(peer.ip()) {
            Ok(p) => p,
            Err(hit) => {
                tracing::warn!(target: "security.limits", event = "security.connection_limit", peer = %peer.ip(), %hit, "connection refused");
                tokio::spawn(refuse(stream, hit));
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let stop = stop.clone();
        let header_timeout = limits.header_read_timeout;
        tracker.spawn(async move {
            let _permit = permit;
            serve_connection(stream, peer, app, header_timeout, stop).await;
        });
    }
    tracker.close();
    tracker.wait().await;
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    header_timeout: Duration,
    stop: CancellationToken,
) {
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(ConnectInfo(peer));
        let mut app = app.clone();
        async move { Ok::<_, Infallible>(app.call(req).await.unwrap_or_else(|e| match e {})) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let conn = builder
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades();
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        // Time-outs, resets and malformed requests end here; none concerns the others.
        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
    }
}

/// Tells an over-cap client why, without reading its request.
async fn refuse(mut stream: TcpStream, hit: LimitHit) {
    let body = serde_json::json!({"error": {
        "message": format!("too many connections: {hit}"),
        "type": "server_error",
        "code": "too_many_connections",
    }})
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(REFUSAL_WRITE, write).await;
}
