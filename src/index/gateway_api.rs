//! Whether the cluster serves the Gateway API: the operator implements it only where the user
//! installed its CRDs (it ships none of them). Without them, everything else works and no
//! Gateway API kind is watched: a watch of a kind the API server does not serve would fail and
//! retry forever.

use std::time::Duration;

use envoy_operator_core::api::gateway::{
    GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant, TLSRoute,
};
use kube::{Client, Resource};
use tracing::{info, warn};

use crate::ops::logging::KubeError;

/// How many times a failed discovery is asked again before the Gateway API is taken as absent
/// (the API server was already reached: a failure here is rare and short).
const DISCOVERY_ATTEMPTS: u32 = 5;
/// The wait before the first retry; doubled after each.
const DISCOVERY_BACKOFF: Duration = Duration::from_millis(500);

/// Whether the operator implements the Gateway API in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GatewayApi {
    /// The API server serves every kind the operator reads.
    On,
    /// It does not: the reason (which kinds are missing), as logged.
    Off(String),
}

impl GatewayApi {
    pub fn is_on(&self) -> bool {
        matches!(self, Self::On)
    }
}

/// What discovery found: whether the Gateway API is on, and which of the kinds the operator
/// serves when they are there (GRPCRoute, TLSRoute) are served too. The Gateway controller needs only
/// the four kinds of [`GatewayApi::On`]; each optional kind is watched only where it is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    pub api: GatewayApi,
    /// Whether GRPCRoutes (`v1`) are served, and the Gateway API is on.
    pub grpc_routes: bool,
    /// Whether TLSRoutes (`v1alpha2`, the experimental channel) are served, and the Gateway
    /// API is on.
    pub tls_routes: bool,
}

impl Discovery {
    fn off(reason: String) -> Self {
        Self { api: GatewayApi::Off(reason), grpc_routes: false, tls_routes: false }
    }
}

/// One kind the operator reads: its `apiVersion` and its resource's plural name.
struct Needed {
    api_version: String,
    plural: String,
}

fn needed<K: Resource<DynamicType = ()>>() -> Needed {
    Needed { api_version: K::api_version(&()).into_owned(), plural: K::plural(&()).into_owned() }
}

/// Asks the API server (discovery, which every authenticated client may read) whether it
/// serves GatewayClasses, Gateways, HTTPRoutes (`gateway.networking.k8s.io/v1`) and
/// ReferenceGrants (`v1beta1`), and then GRPCRoutes (`v1`) and TLSRoutes (`v1alpha2`); logs
/// once when it does not, and why (an optional kind missing, once, as information).
pub(super) async fn discover(client: &Client) -> Discovery {
    let needed =
        [needed::<GatewayClass>(), needed::<Gateway>(), needed::<HTTPRoute>(), needed::<ReferenceGrant>()];
    let tls = self::needed::<TLSRoute>();
    let mut versions: Vec<&str> = needed.iter().map(|kind| kind.api_version.as_str()).collect();
    versions.sort_unstable();
    versions.dedup();
    let mut served = Vec::new();
    for version in versions {
        match served_resources(client, version).await {
            Ok(resources) => served.extend(resources.into_iter().map(|plural| (version.to_owned(), plural))),
            Err(reason) => {
                warn!(%reason, "the Gateway controller is OFF: the API server could not tell whether it serves the Gateway API; restart the operator to ask again");
                return Discovery::off(reason);
            }
        }
    }
    let missing: Vec<String> = needed
        .iter()
        .filter(|kind| {
            !served.iter().any(|(version, plural)| *version == kind.api_version && *plural == kind.plural)
        })
        .map(|kind| format!("{} ({})", kind.plural, kind.api_version))
        .collect();
    if missing.is_empty() {
        info!("the API server serves the Gateway API: the Gateway controller is on");
        let grpc = self::needed::<GRPCRoute>();
        let grpc_routes =
            served.iter().any(|(version, plural)| *version == grpc.api_version && *plural == grpc.plural);
        if !grpc_routes {
            info!(
                "the API server does not serve grpcroutes ({}): GRPCRoutes are not watched",
                grpc.api_version
            );
        }
        let tls_routes = served_kind(client, &tls).await;
        if !tls_routes {
            info!(
                "the API server does not serve tlsroutes ({}, the experimental channel): TLSRoutes are not watched",
                tls.api_version
            );
        }
        return Discovery { api: GatewayApi::On, grpc_routes, tls_routes };
    }
    let reason = format!("the API server does not serve {}", missing.join(", "));
    // None of it is a cluster without the Gateway API, as many are; some of it, a broken or
    // outdated install.
    match missing.len() == needed.len() {
        true => info!(%reason, "the Gateway controller is off: {FIX}"),
        false => warn!(%reason, "the Gateway controller is OFF: {FIX}"),
    }
    Discovery::off(reason)
}

/// Whether the API server serves `kind`, in a version none of the needed kinds is in: a version
/// it does not serve at all (the standard channel has no `v1alpha2`) is not an error, only no.
async fn served_kind(client: &Client, kind: &Needed) -> bool {
    match served_resources(client, &kind.api_version).await {
        Ok(resources) => resources.contains(&kind.plural),
        Err(reason) => {
            info!(%reason, "could not ask whether the API server serves {} ({}): they are not watched", kind.plural, kind.api_version);
            false
        }
    }
}

/// What to do about a missing Gateway API.
const FIX: &str = "install the Gateway API CRDs (standard channel v1.3 or newer) and restart the operator";

/// The resources (plural names) the API server serves in `version`; none when it does not
/// serve the version at all. `Err` says why it could not be told.
async fn served_resources(client: &Client, version: &str) -> Result<Vec<String>, String> {
    let mut delay = DISCOVERY_BACKOFF;
    let mut attempt = 1;
    loop {
        match client.list_api_group_resources(version).await {
            Ok(list) => return Ok(list.resources.into_iter().map(|resource| resource.name).collect()),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
            Err(error) if attempt >= DISCOVERY_ATTEMPTS => {
                return Err(format!(
                    "asking the API server which resources {version} serves failed: {}",
                    KubeError(&error)
                ));
            }
            Err(error) => {
                warn!(%version, error = %KubeError(&error), retry_in_s = delay.as_secs_f32(), "Gateway API discovery failed; retrying");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
        }
    }
}
