//! Accepting connections for tonic: TCP, then a rustls handshake (TLS 1.2+, ALPN `h2`, the
//! certificate from a resolver the operator can swap at any time) run off the accept loop
//! under a deadline, a cap on open connections, and the peer address handed to tonic through
//! [`Connected`] so the authorizer can see it.
//!
//! Hand-written rather than taken from a crate (`tls-listener`, tonic's own TLS): tonic's TLS
//! takes a fixed identity, not a `ResolvesServerCert`, and the connection cap needs a permit
//! that lives exactly as long as the connection, which this wrapper holds.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::server::ResolvesServerCert;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tracing::{debug, info, warn};

/// The rustls configuration of the xDS port: TLS 1.3 and 1.2 with the ring provider, no client
/// certificate, HTTP/2 only.
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// How accepted TCP connections become gRPC connections.
pub(crate) enum Handshake {
    Tls { acceptor: TlsAcceptor, timeout: Duration },
    Plaintext,
}

enum Io {
    Tls(Box<TlsStream<TcpStream>>),
    Plain(TcpStream),
}

/// An accepted connection: its byte stream, its addresses, and its place under the cap.
pub(crate) struct Connection {
    io: Io,
    info: TcpConnectInfo,
    _permit: OwnedSemaphorePermit,
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Io::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Io::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
            Io::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Tls(stream) => stream.is_write_vectored(),
            Io::Plain(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Io::Plain(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Io::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}

/// Accepted connections as a stream for tonic, and the task producing them.
pub(crate) struct Incoming {
    pub connections: ReceiverStream<Result<Connection, Infallible>>,
    pub accept_loop: JoinHandle<()>,
}

/// Starts accepting on `listener`. The accept loop stops (closing the listening socket) once
/// tonic drops the stream.
pub(crate) fn incoming(listener: TcpListener, handshake: Handshake, max_connections: usize) -> Incoming {
    let (tx, rx) = mpsc::channel(64);
    let permits = Arc::new(Semaphore::new(max_connections));
    let accept_loop = tokio::spawn(accept_loop(listener, Arc::new(handshake), permits, tx));
    Incoming { connections: ReceiverStream::new(rx), accept_loop }
}

type Sender = mpsc::Sender<Result<Connection, Infallible>>;

async fn accept_loop(listener: TcpListener, handshake: Arc<Handshake>, permits: Arc<Semaphore>, tx: Sender) {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = tx.closed() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // E.g. out of file descriptors: back off rather than spin.
                    warn!(%error, "accepting an xDS connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            warn!(%peer, "refusing an xDS connection: at the connection limit");
            continue;
        };
        if let Err(error) = tcp.set_nodelay(true) {
            debug!(%peer, %error, "setting TCP_NODELAY failed");
        }
        let info = TcpConnectInfo { local_addr: tcp.local_addr().ok(), remote_addr: Some(peer) };
        match &*handshake {
            Handshake::Plaintext => {
                let connection = Connection { io: Io::Plain(tcp), info, _permit: permit };
                if tx.send(Ok(connection)).await.is_err() {
                    return;
                }
            }
            Handshake::Tls { .. } => {
                tokio::spawn(tls_handshake(handshake.clone(), tcp, peer, info, permit, tx.clone()));
            }
        }
    }
}

async fn tls_handshake(
    handshake: Arc<Handshake>,
    tcp: TcpStream,
    peer: SocketAddr,
    info: TcpConnectInfo,
    permit: OwnedSemaphorePermit,
    tx: Sender,
) {
    let Handshake::Tls { acceptor, timeout } = &*handshake else { return };
    match tokio::time::timeout(*timeout, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => {
            let connection = Connection { io: Io::Tls(Box::new(stream)), info, _permit: permit };
            // Fails only once the server stopped accepting; the connection is then dropped.
            let _ = tx.send(Ok(connection)).await;
        }
        Ok(Err(error)) => info!(%peer, %error, "TLS handshake failed"),
        Err(_) => debug!(%peer, "TLS handshake timed out"),
    }
}
