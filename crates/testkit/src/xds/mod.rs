//! xDS for tests and examples: Envoy resources ([`resources`]), the fleet a node names, and a
//! control plane on a loopback port, started and stopped around the server the caller passes
//! (the library's `xds::server::serve`).

pub mod resources;

use std::fmt::Debug;
use std::future::Future;
use std::net::SocketAddr;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Status;

/// The fleet a node names in its metadata (`fleet: <namespace>/<name>`).
fn fleet_of(node: &Node) -> Option<String> {
    let value = node.metadata.as_ref()?.fields.get("fleet")?;
    match &value.kind {
        Some(Kind::StringValue(fleet)) => Some(fleet.clone()),
        _ => None,
    }
}

/// Admits nodes naming one of `fleets` in their metadata, as the fleet key `K` (the server's
/// `FleetKey`).
pub fn authorize_fleets<K: From<String>>(
    fleets: &[&str],
) -> impl Fn(&Node, Option<SocketAddr>) -> Result<K, Status> + Send + Sync + 'static {
    let fleets: Vec<String> = fleets.iter().map(|fleet| fleet.to_string()).collect();
    move |node, _peer| match fleet_of(node) {
        Some(fleet) if fleets.contains(&fleet) => Ok(K::from(fleet)),
        other => {
            Err(Status::permission_denied(format!("node {:?} names no known fleet ({other:?})", node.id)))
        }
    }
}

/// A server on a loopback port (the xDS server, in the tests), stopped gracefully by
/// [`stop`](Self::stop) and aborted when dropped.
pub struct ControlPlane<E> {
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), E>>,
}

impl<E: Debug + Send + 'static> ControlPlane<E> {
    /// Binds `address` (port 0: any free port) and spawns `serve(listener, shutdown)`.
    pub fn spawn<F>(address: SocketAddr, serve: impl FnOnce(TcpListener, BoxFuture<'static, ()>) -> F) -> Self
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let listener = bind(address);
        let address = listener.local_addr().expect("the control plane's address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, stopped.map(|_| ()).boxed()));
        ControlPlane { address, stop: Some(stop), task }
    }

    /// Shuts down gracefully; the port is free again when this returns.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = (&mut self.task).await.expect("the server task ran to its end");
        result.expect("the server shut down cleanly");
    }
}

impl<E> Drop for ControlPlane<E> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener that can take over a port another one just left.
fn bind(address: SocketAddr) -> TcpListener {
    let socket = TcpSocket::new_v4().expect("a socket");
    socket.set_reuseaddr(true).expect("SO_REUSEADDR");
    socket.bind(address).unwrap_or_else(|error| panic!("binding {address}: {error}"));
    socket.listen(1024).expect("listening")
}
