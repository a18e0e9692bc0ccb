//! One accepted xDS connection served over HTTP/2 by hyper, until it ends or the server closes
//! it (gracefully: GOAWAY, then its stream ends and the connection closes).
//!
//! hyper's server rather than tonic's: hyper calls the service in the connection's task as it
//! takes a stream's headers, and the call here reads what it needs of them (the path; the
//! address and identity are the connection's) and drops them there, so decoded headers never
//! wait for a task to run. tonic's server defers the whole call to the stream's task
//! (hyper-util's `TowerToHyperService` polls a `Oneshot` there), so after a burst of new
//! streams each held its headers, up to 11 KiB decoded, until its task got its turn.

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use h2::server::WriteBudget;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::debug;

use super::accept::Connection;
use super::grpc::AdsGrpc;
use super::receive_budget::ReceiveBudget;
use super::serve::{HPACK_TABLE_BYTES, MAX_HEADER_LIST_BYTES};
use crate::net::ConnectionLimits;

/// What every connection of a server is served with.
pub(super) struct Serving {
    http2: http2::Builder<TokioExecutor>,
    grpc: AdsGrpc,
    receive_budget: ReceiveBudget,
    writing_budget: WriteBudget,
}

impl Serving {
    /// The ADS service under `limits`' HTTP/2 settings, request bodies charged to
    /// `receive_budget`, and each connection's writing to `writing_budget`.
    pub fn new(
        grpc: AdsGrpc,
        limits: &ConnectionLimits,
        receive_budget: ReceiveBudget,
        writing_budget: WriteBudget,
    ) -> Self {
        let mut http2 = limits.http2_server();
        http2.max_header_list_size(MAX_HEADER_LIST_BYTES).header_table_size(HPACK_TABLE_BYTES);
        Self { http2, grpc, receive_budget, writing_budget }
    }

    /// Serves `connection` to its end; once `closing` is cancelled, closes it gracefully.
    /// Shared rather than cloned: the connection's task holds this for its life.
    ///
    /// The HTTP/2 connection is built before the returned future, which owns only it: the
    /// task's future is what a connection holds for its life, and an `async fn` would keep room
    /// for its arguments (the connection, 352 bytes) beside the HTTP/2 connection they go into.
    pub fn serve(
        self: Arc<Self>,
        connection: Connection,
        closing: CancellationToken,
    ) -> impl Future<Output = ()> {
        let peer = connection.info().remote_addr;
        let service = Streams {
            grpc: self.grpc.clone(),
            receive_budget: self.receive_budget.clone(),
            connection: connection.info().clone(),
        };
        // h2 builds the connection here, taking the budget it writes with (`vendor/h2`).
        let served = h2::server::with_write_budget(&self.writing_budget, || {
            self.http2.serve_connection(TokioIo::new(connection), service)
        });
        Served { served, closing: Box::pin(closing.cancelled_owned()), closed: false, peer }
    }
}

/// A connection being served: once `closing` is cancelled, it is closed gracefully.
struct Served {
    served: http2::Connection<TokioIo<Connection>, Streams, TokioExecutor>,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    closed: bool,
    peer: Option<SocketAddr>,
}

impl Future for Served {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if !this.closed && this.closing.as_mut().poll(cx).is_ready() {
            this.closed = true;
            Pin::new(&mut this.served).graceful_shutdown();
        }
        if let Err(error) = ready!(Pin::new(&mut this.served).poll(cx)) {
            debug!(peer = this.peer.map(tracing::field::display), %error, "xDS connection ended");
        }
        Poll::Ready(())
    }
}

/// The streams of one connection, each answered as hyper takes its headers.
#[derive(Clone)]
struct Streams {
    grpc: AdsGrpc,
    receive_budget: ReceiveBudget,
    connection: super::XdsConnectInfo,
}

impl hyper::service::Service<http::Request<Incoming>> for Streams {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        // tonic's body gives h2's errors as gRPC statuses (a reset stream is `CANCELLED`).
        let request = request.map(|body| self.receive_budget.charge(tonic::body::Body::new(body)));
        std::future::ready(Ok(self.grpc.respond(request, Some(&self.connection))))
    }
}
