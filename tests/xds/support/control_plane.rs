//! The library's xDS server on a loopback port (testkit's [`ControlPlane`](envoy_operator_testkit::xds::ControlPlane)
//! around `xds::server::serve`), started and stopped by the tests.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::xds::server::{AdsService, FleetKey, ServeConfig, ServeError, Transport, serve};
use envoy_types::pb::envoy::config::core::v3::Node;
use tonic::Status;

/// Admits nodes naming one of `fleets` in their metadata.
pub fn authorize_fleets(
    fleets: &[&str],
) -> impl Fn(&Node, Option<SocketAddr>) -> Result<FleetKey, Status> + Send + Sync + 'static {
    envoy_operator_testkit::xds::authorize_fleets(fleets)
}

pub struct ControlPlane {
    pub address: SocketAddr,
    server: envoy_operator_testkit::xds::ControlPlane<ServeError>,
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
        let server = envoy_operator_testkit::xds::ControlPlane::spawn(address, |listener, shutdown| {
            serve(listener, service, config, shutdown)
        });
        ControlPlane { address: server.address, server }
    }

    /// Shuts down gracefully; the port is free again when this returns.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}
