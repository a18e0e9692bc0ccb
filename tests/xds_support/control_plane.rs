//! The xDS server on a loopback port, started and stopped by tests and examples.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::xds_server::{AdsService, FleetKey, ServeConfig, ServeError, Transport, serve};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::Status;

/// The fleet a node names in its metadata (`fleet: <namespace>/<name>`).
pub fn fleet_of(node: &Node) -> Option<String> {
    let value = node.metadata.as_ref()?.fields.get("fleet")?;
    match &value.kind {
        Some(Kind::StringValue(fleet)) => Some(fleet.clone()),
        _ => None,
    }
}

/// Admits nodes naming one of `fleets` in their metadata.
pub fn authorize_fleets(
    fleets: &[&str],
) -> impl Fn(&Node, Option<SocketAddr>) -> Result<FleetKey, Status> + Send + Sync + 'static {
    let fleets: Vec<String> = fleets.iter().map(|fleet| fleet.to_string()).collect();
    move |node, _peer| match fleet_of(node) {
        Some(fleet) if fleets.contains(&fleet) => Ok(FleetKey::from(fleet)),
        other => {
            Err(Status::permission_denied(format!("node {:?} names no known fleet ({other:?})", node.id)))
        }
    }
}

pub struct ControlPlane {
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl ControlPlane {
    /// Serves on `address` (port 0: any free port).
    pub async fn start(address: SocketAddr, service: AdsService, transport: Transport) -> ControlPlane {
        Self::start_with(address, service, ServeConfig::new(transport)).await
    }

    pub async fn start_with(
        address: SocketAddr,
        service: AdsService,
        mut config: ServeConfig,
    ) -> ControlPlane {
        config.shutdown_grace = Duration::from_secs(2);
        let listener = bind(address);
        let address = listener.local_addr().expect("the control plane's address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(listener, service, config, async move {
            let _ = stopped.await;
        }));
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

impl Drop for ControlPlane {
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
