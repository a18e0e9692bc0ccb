//! The TCP stream as a connection's I/O: bytes arriving are recorded in its [`Activity`], and
//! every write has a deadline.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::activity::Activity;

/// The TCP stream with its activity recorded and a deadline on every write: a write that
/// stays blocked for `write_timeout` (the client not reading) fails with `TimedOut`.
pub(super) struct Monitored {
    tcp: TcpStream,
    activity: Arc<Activity>,
    write_timeout: Duration,
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl Monitored {
    pub(super) fn new(tcp: TcpStream, activity: Arc<Activity>, write_timeout: Duration) -> Self {
        Self { tcp, activity, write_timeout, write_deadline: None }
    }

    /// Runs a write-side operation under the write deadline.
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        operation: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match operation(Pin::new(&mut self.tcp), cx) {
            Poll::Ready(result) => {
                if self.write_deadline.take().is_some() {
                    self.activity.write_resumes();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let deadline = self.write_deadline.get_or_insert_with(|| {
                    self.activity.write_blocks();
                    Box::pin(tokio::time::sleep(timeout))
                });
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client did not read the response in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for Monitored {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.on_read();
        }
        result
    }
}

impl AsyncWrite for Monitored {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.timed(cx, |tcp, cx| tcp.poll_write(cx, data))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.timed(cx, |tcp, cx| tcp.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed(cx, AsyncWrite::poll_flush)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed(cx, AsyncWrite::poll_shutdown)
    }
}
