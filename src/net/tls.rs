//! TLS on every port: the server configuration, and the handshake of an accepted connection,
//! given up when the connection is asked to make room at the cap (a real client completes it
//! in milliseconds).

use std::io;
use std::sync::Arc;

use rustls::server::ResolvesServerCert;
use rustls::server::danger::ClientCertVerifier;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::activity::Activity;

/// The rustls configuration of a port: the ring provider (as the rest of the binary), TLS 1.3
/// and 1.2 only, the certificate `resolver` picks per handshake (so a renewed one is served
/// without a restart), client certificates checked by `clients` (none asked for without), and
/// the ALPN protocols `alpn`, preferred first.
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    clients: Option<Arc<dyn ClientCertVerifier>>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let mut config = match clients {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    }
    .with_cert_resolver(resolver);
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Why a TLS handshake did not complete.
pub(crate) enum HandshakeError {
    Failed(io::Error),
    /// Still going after [`super::slots::HOARDING`] while a client waited at the cap.
    Evicted,
}

/// The TLS handshake, given up when asked to make room. The caller bounds it with its
/// handshake timeout.
pub(crate) async fn handshake<IO>(
    acceptor: &TlsAcceptor,
    io: IO,
    activity: &Activity,
) -> Result<TlsStream<IO>, HandshakeError>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let accepting = acceptor.accept(io);
    tokio::pin!(accepting);
    loop {
        tokio::select! {
            result = &mut accepting => return result.map_err(HandshakeError::Failed),
            () = activity.eviction.notified() => {
                if activity.accept_eviction().is_some() {
                    return Err(HandshakeError::Evicted);
                }
            }
        }
    }
}
