//! A listener whose connections can all be cut at once: a test server that "dies" must
//! look like a lost connection to its client (a long poll, an SSE stream, a call in
//! flight fail), not wait for them as axum's graceful shutdown would.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Hands out connections that fail their next read or write once `kill` is
/// cancelled. axum's graceful shutdown alone would wait for in-flight requests
/// (a `sleep` call, an SSE stream), but a stopped fixture must look like a dead
/// server to its client.
pub(crate) struct KillableListener {
    pub(crate) inner: TcpListener,
    pub(crate) kill: CancellationToken,
}

impl axum::serve::Listener for KillableListener {
    type Io = KillableIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        // Small SSE writes would otherwise wait on Nagle + delayed ACK.
        let _ = io.set_nodelay(true);
        let io = KillableIo {
            io,
            killed: Box::pin(self.kill.clone().cancelled_owned()),
            kill: self.kill.clone(),
        };
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

pub(crate) struct KillableIo {
    io: TcpStream,
    kill: CancellationToken,
    /// Polled on every read and write so that a connection parked in either
    /// is woken by the kill.
    killed: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl KillableIo {
    fn check(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        // `is_cancelled` first: the future must not be polled after it completed.
        if self.kill.is_cancelled() || self.killed.as_mut().poll(cx).is_ready() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "test server stopped",
            ));
        }
        Ok(())
    }
}

impl AsyncRead for KillableIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.check(cx)?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check(cx)?;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// A fake's HTTP server on a fixed port that can go away (every connection cut, the
/// port closed) and come back with the same state: a network outage, as its client
/// sees one. Dropping it stops the server.
pub(crate) struct Served {
    pub(crate) port: u16,
    /// The app for one serving: it gets the token that ends this serving (long polls
    /// answer at once then, so the cut connection fails now).
    app: AppFor,
    server: std::sync::Mutex<Option<(CancellationToken, tokio::task::JoinHandle<()>)>>,
}

type AppFor = Box<dyn Fn(CancellationToken) -> axum::Router + Send + Sync>;

impl Served {
    /// Serves `app` on 127.0.0.1:`port` (0: a free one).
    pub(crate) async fn start(port: u16, app: axum::Router) -> io::Result<Served> {
        Served::start_with(port, move |_| app.clone()).await
    }

    /// Serves `app` on a port already bound (a fake whose state must know its port before
    /// the router is built keeps the port held: binding again after dropping it races other
    /// tests for it).
    pub(crate) fn start_on(
        listener: std::net::TcpListener,
        app: axum::Router,
    ) -> io::Result<Served> {
        listener.set_nonblocking(true)?;
        Served::serving(
            TcpListener::from_std(listener)?,
            Box::new(move |_| app.clone()),
        )
    }

    /// Serves the app `app` builds for each serving (see [`Served::app`]).
    pub(crate) async fn start_with(
        port: u16,
        app: impl Fn(CancellationToken) -> axum::Router + Send + Sync + 'static,
    ) -> io::Result<Served> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        Served::serving(listener, Box::new(app))
    }

    /// Serves on `listener` from now on.
    fn serving(listener: TcpListener, app: AppFor) -> io::Result<Served> {
        let served = Served {
            port: listener.local_addr()?.port(),
            server: std::sync::Mutex::new(None),
            app,
        };
        served.serve(listener);
        Ok(served)
    }

    pub(crate) fn is_up(&self) -> bool {
        self.server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn serve(&self, listener: TcpListener) {
        let kill = CancellationToken::new();
        let listener = KillableListener {
            inner: listener,
            kill: kill.clone(),
        };
        let signal = kill.clone().cancelled_owned();
        let app = (self.app)(kill.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(signal)
                .await
            {
                eprintln!("test fake: server failed: {e}");
            }
        });
        let old = self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace((kill, task));
        if let Some((kill, _)) = old {
            kill.cancel();
        }
    }

    /// Cuts every connection and closes the port until [`Served::restore`].
    pub(crate) async fn disconnect(&self) {
        let server = self.server.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((kill, task)) = server {
            kill.cancel();
            let _ = task.await;
        }
    }

    /// Serves again on the same port; a no-op while serving.
    pub(crate) async fn restore(&self) -> io::Result<()> {
        if self
            .server
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return Ok(());
        }
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await?;
        self.serve(listener);
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some((kill, _)) = self.server.lock().unwrap_or_else(|e| e.into_inner()).take() {
            kill.cancel();
        }
    }
}
