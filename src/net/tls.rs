//! The TLS handshake of an accepted connection, given up when the connection is asked to make
//! room at the cap (a real client completes it in milliseconds).

use std::io;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::activity::Activity;

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
