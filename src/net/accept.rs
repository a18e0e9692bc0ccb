//! The accept loop every port runs: accept a TCP connection, take a slot for it (waiting at
//! the cap while room is made, or refusing it), and hand it to the server, until told to stop.

use std::future::Future;
use std::net::SocketAddr;
use std::ops::ControlFlow;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;

use super::serve_config::ServeConfig;
use super::slots::{Slots, Taken};

/// What a server does with the connections its accept loop takes.
pub(crate) trait Accept {
    /// Serves, or hands on, a connection that holds `slot` for as long as it is open; `Break`
    /// once nothing takes connections any more.
    fn accepted(
        &mut self,
        tcp: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
    ) -> impl Future<Output = ControlFlow<()>> + Send;

    /// A connection closed at once: every slot was taken and the server refuses at the cap.
    fn refused(&mut self, peer: SocketAddr);
}

/// Accepts on `listener` until `stop` completes (also while a client waits for a slot) or the
/// server breaks off. The listening socket stays open until the caller drops it.
pub(crate) async fn accept_loop<S>(
    listener: &TcpListener,
    config: &ServeConfig<S>,
    slots: &Slots,
    stop: impl Future<Output = ()>,
    server: &mut impl Accept,
) {
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = stop.as_mut() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(server = config.name, %error, "accepting a connection failed");
                    tokio::time::sleep(config.accept_retry).await;
                    continue;
                }
            },
        };
        // At the cap this client waits here, accepted and not yet served: the one whose
        // waiting makes room; the clients after it wait in the backlog.
        let slot = match slots.take(stop.as_mut()).await {
            Taken::Slot(slot) => slot,
            Taken::Refused => {
                server.refused(peer);
                continue;
            }
            Taken::Stopped => break,
        };
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(server = config.name, %peer, %error, "setting TCP_NODELAY failed");
        }
        if server.accepted(tcp, peer, slot).await.is_break() {
            break;
        }
    }
}
