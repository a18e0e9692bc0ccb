//! One replica's control plane, assembled: the index's caches, the publisher, and the ADS server
//! on its TLS port, sharing the webhook's certificate.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use envoy_operator_core::bootstrap::ControlPlane;
use futures::FutureExt;
use kube::Client;
use rustls::server::ResolvesServerCert;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::authorize::{FleetAuthorizer, PodRoles};
use super::isolate::{self, Isolation, Republish};
use super::publish::gateways::{self, GatewayOutputs};
use super::publish::inputs::{self, Caches};
use super::publish::{self, GatewayOutcomes, Outputs, RouteOutcomes};
use super::report::{self, ReportConfig};
use crate::certs::client_auth::ClientTrust;
use crate::index::Index;
use crate::ops::health::{Health, Readiness};
use crate::xds::metrics::ControlPlaneMetrics;
use crate::xds::server::{
    self, AdsConfig, AdsService, ServeConfig, ServeError, SnapshotCache, Tracker, Transport, memory_limit,
    nack_budget, subscription_budget,
};

/// What `run` is told about the control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsConfig {
    /// The ADS port.
    pub listen: SocketAddr,
    /// Where fleets reach it (written into their bootstraps).
    pub advertise: ControlPlane,
    /// Serve a connection without a client certificate the fleet its node metadata names: for
    /// Envoys started by hand, outside a cluster, in development.
    pub insecure_node_identity: bool,
}

/// What `receiver` receives, as a stream that ends when every sender is gone.
fn received<T: Send + 'static>(
    receiver: mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// A bound, not yet serving, control plane.
pub struct ControlPlaneServer {
    listener: TcpListener,
    service: AdsService,
    pub caches: Caches,
    pub cache: SnapshotCache,
    pub tracker: Tracker,
    publisher: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    isolation: Isolation,
    republish: Republish,
}

impl ControlPlaneServer {
    /// Binds the ADS port (so that a taken port fails `run` at once) and starts the watches of
    /// `namespace` (all namespaces when `None`): the Gateway API's too where the API server
    /// serves it, whose translation goes to `gateway_outcomes` as the routes' goes to
    /// `outcomes`. `/readyz` reports `xds` not ready until the caches are filled and every
    /// fleet published: a proxy connecting earlier would be refused as a stranger.
    pub async fn bind(
        config: &XdsConfig,
        index: &Index,
        outcomes: RouteOutcomes,
        gateway_outcomes: GatewayOutcomes,
        identity: &str,
        metrics: &ControlPlaneMetrics,
        health: &Health,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(config.listen).await?;
        let (caches, touched) = inputs::from_index(index);
        let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
        let authorizer = FleetAuthorizer {
            envoys: caches.envoys.clone(),
            insecure_node_identity: config.insecure_node_identity,
        };
        let service = AdsService::builder(cache.clone(), authorizer)
            .tracker(tracker.clone())
            .metrics(Arc::new(metrics.clone()))
            .config(AdsConfig {
                control_plane_id: Some(identity.to_owned()),
                subscription_budget: subscription_budget(memory_limit()),
                nack_budget: nack_budget(memory_limit()),
                ..AdsConfig::default()
            })
            .build();
        let ready = Readiness::default();
        health.add_readiness("xds", &ready);
        let snapshots = Some((cache.clone(), tracker.clone()));
        // A route the proxies reject sends its publisher back to work, without it.
        let isolation = Isolation::default();
        let (routes_again, routes_rejected) = mpsc::unbounded_channel();
        let (gateways_again, gateways_rejected) = mpsc::unbounded_channel();
        let republish = Republish { routes: routes_again, gateways: gateways_again };
        let isolating = isolate::run(isolation.clone(), tracker.clone(), republish.clone());
        let outputs = Outputs { snapshots: snapshots.clone(), outcomes, isolation: Some(isolation.clone()) };
        let (routes_done, routes_published) = oneshot::channel::<()>();
        let touched = futures::stream::select(touched, received(routes_rejected));
        let routes = publish::run(caches.clone(), touched, outputs, move || {
            let _ = routes_done.send(());
        });
        let (gateways_done, gateways_published) = oneshot::channel::<()>();
        let gateways = match index.gateway_api().await.is_on() {
            true => {
                let (gateway_caches, changed) = gateways::from_index(index);
                let changed = futures::stream::select(changed, received(gateways_rejected));
                let outputs = GatewayOutputs {
                    snapshots,
                    outcomes: gateway_outcomes,
                    isolation: Some(isolation.clone()),
                };
                gateways::run(gateway_caches, changed, outputs, move || {
                    let _ = gateways_done.send(());
                })
                .boxed()
            }
            // No HTTPRoutes, so no mesh routes: the mesh's sidecars are served pass-through.
            false => {
                let (mesh_caches, changed) = gateways::mesh_only_from_index(index);
                let outputs = GatewayOutputs { snapshots, outcomes: gateway_outcomes, isolation: None };
                gateways::run(mesh_caches, changed, outputs, move || {
                    let _ = gateways_done.send(());
                })
                .boxed()
            }
        };
        let readiness = async move {
            if routes_published.await.is_ok() && gateways_published.await.is_ok() {
                ready.set(true);
            }
        };
        // Ends once every watch ended (with the client); the isolation, which has no end of its
        // own, with it.
        let publisher = Box::pin(async move {
            tokio::select! {
                _ = async { tokio::join!(routes, gateways, readiness) } => {}
                () = isolating => {}
            }
        });
        Ok(Self { listener, service, caches, cache, tracker, publisher, isolation, republish })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// [`serve`](Self::serve) until `stop`, and meanwhile keep this replica's report of its
    /// proxies current for the leader ([`report`]); the report is deleted when serving stops,
    /// so the leader stops counting these proxies at once.
    pub async fn serve_and_report(
        self,
        client: Client,
        report: ReportConfig,
        certificate: Arc<dyn ResolvesServerCert>,
        clients: Arc<ClientTrust>,
        stop: CancellationToken,
    ) -> Result<(), ServeError> {
        if let Ok(address) = self.local_addr() {
            tracing::info!(listen = %address, "serving the xDS control plane");
        }
        let roles = Arc::new(PodRoles { pods: self.caches.pods.clone() });
        let adopting = isolate::adopt_reported(
            client.clone(),
            &report.namespace,
            self.isolation.clone(),
            self.republish.clone(),
            stop.clone().cancelled_owned(),
        );
        let reporting = report::run(
            client,
            report.clone(),
            self.tracker.clone(),
            self.cache.clone(),
            roles,
            self.isolation.clone(),
            stop.clone().cancelled_owned(),
        );
        let (served, (), ()) =
            tokio::join!(self.serve(certificate, clients, stop.cancelled_owned()), reporting, adopting);
        served
    }

    /// Serves until `shutdown`, to clients with a certificate `clients` accepts; the caches and
    /// the publisher run as long.
    pub async fn serve(
        self,
        certificate: Arc<dyn ResolvesServerCert>,
        clients: Arc<ClientTrust>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServeError> {
        let server = server::serve(
            self.listener,
            self.service,
            ServeConfig::new(Transport::MutualTls { certificate, clients }),
            shutdown,
        );
        tokio::pin!(server);
        tokio::select! {
            result = &mut server => result,
            () = self.publisher => {
                // The watches only end with the client; keep serving what was published.
                tracing::warn!("the control plane's watches ended; serving the last configuration");
                server.await
            }
        }
    }
}
