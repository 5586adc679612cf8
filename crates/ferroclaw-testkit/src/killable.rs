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
