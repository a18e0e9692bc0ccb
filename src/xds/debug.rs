//! What each proxy connected to this replica was served and what it did with it, on the
//! operations port (Istio's `/debug/config_dump`, Envoy Gateway's `egctl config`):
//!
//! - `GET /debug/proxies`: this replica's connected proxies, one line each (fleet, applied and
//!   served versions, the types it rejects);
//! - `GET /debug/proxies/{node}`: every proxy whose node id (its pod's name) is `node`: its
//!   fleet, connection, per resource type the version it ACKed and its last NACK with Envoy's
//!   own words, and the fleet's newest configuration as served (every resource's name and
//!   version, and the whole of it in `render --xds`'s JSON form, private keys redacted).
//!
//! The configuration shown is the newest the control plane serves the proxy's fleet: whether
//! the proxy has all of it is `inSync` (its `appliedVersion` is `servedVersion`); an older
//! version's content is not kept. `envoy-operator proxy-config` reads these through the API
//! server ([`crate::cli::proxy_config`]).

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::xds::server::{FleetKey, Nack, ProxyStatus, SnapshotCache, Tracker};

/// The longest node id asked about: a pod's name is at most 253 characters.
const MAX_NODE_BYTES: usize = 253;

/// The control plane's state as the operations port reads it; empty until the replica serves
/// xDS (then every request answers 404 saying so).
#[derive(Clone, Default)]
pub struct ProxyDebug {
    served: Arc<OnceLock<Served>>,
}

#[derive(Clone)]
struct Served {
    replica: String,
    cache: SnapshotCache,
    tracker: Tracker,
}

/// One proxy, in a line of `GET /debug/proxies`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProxySummary {
    pub node: String,
    pub fleet: String,
    pub peer: Option<String>,
    pub applied_version: Option<String>,
    pub served_version: Option<String>,
    pub in_sync: bool,
    /// The short names of the resource types whose last response it rejected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejecting: Vec<String>,
}

/// `GET /debug/proxies`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyList {
    pub replica: String,
    pub proxies: Vec<ProxySummary>,
}

/// One proxy's configuration and what it did with it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProxyConfig {
    /// The operator replica serving it (its pod's name).
    pub replica: String,
    pub node: String,
    pub fleet: String,
    pub peer: Option<String>,
    /// `delta` or `sotw`.
    pub protocol: String,
    pub connected_since: String,
    /// The snapshot version it applied entirely, if any.
    pub applied_version: Option<String>,
    /// The newest snapshot version the control plane serves its fleet, if any.
    pub served_version: Option<String>,
    pub in_sync: bool,
    /// Per resource type it asked for: what it ACKed and NACKed.
    pub types: Vec<TypeState>,
    /// The served snapshot: per type, every resource's name and version (Envoy's config dump
    /// shows the same versions for what it applied).
    pub resources: Vec<TypeResources>,
    /// The served snapshot in `render --xds`'s JSON form, private keys redacted.
    pub config: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TypeState {
    #[serde(rename = "type")]
    pub type_url: String,
    pub acked_version: Option<String>,
    /// Whether its last NACK came after its last ACK: it runs without that change.
    pub rejecting: bool,
    pub last_nack: Option<NackState>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NackState {
    pub version: String,
    /// Envoy's `error_detail.message` (cut to 1,024 characters).
    pub message: String,
    pub at: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct TypeResources {
    #[serde(rename = "type")]
    pub type_url: String,
    pub resources: Vec<NamedVersion>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct NamedVersion {
    pub name: String,
    pub version: String,
}

impl ProxyDebug {
    /// From now on, answer from this replica's control plane.
    pub fn serve(&self, replica: impl Into<String>, cache: SnapshotCache, tracker: Tracker) {
        let _ = self.served.set(Served { replica: replica.into(), cache, tracker });
    }

    /// The routes under `/debug/proxies`.
    pub fn router(&self) -> Router {
        let list = self.clone();
        let one = self.clone();
        Router::new().route("/debug/proxies", get(move || async move { list.list() })).route(
            "/debug/proxies/{node}",
            get(move |Path(node): Path<String>| async move { one.one(&node) }),
        )
    }

    fn list(&self) -> Response {
        let Some(served) = self.served.get() else { return not_serving() };
        Json(served.list()).into_response()
    }

    fn one(&self, node: &str) -> Response {
        if node.len() > MAX_NODE_BYTES {
            let message = format!("a node id (a pod's name) is at most {MAX_NODE_BYTES} bytes");
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
        let Some(served) = self.served.get() else { return not_serving() };
        let configs = served.configs(node);
        if configs.is_empty() {
            let message =
                format!("no proxy with node id {node:?} is connected to replica {}\n", served.replica);
            return (StatusCode::NOT_FOUND, message).into_response();
        }
        Json(configs).into_response()
    }
}

fn not_serving() -> Response {
    (StatusCode::NOT_FOUND, "this replica serves no xDS control plane (it runs without a cluster)\n")
        .into_response()
}

impl Served {
    fn connected(&self) -> impl Iterator<Item = (FleetKey, ProxyStatus)> + '_ {
        self.tracker.fleets().into_iter().flat_map(|fleet| {
            let proxies = self.tracker.fleet_status(&fleet).proxies;
            proxies.into_iter().map(move |proxy| (fleet.clone(), proxy))
        })
    }

    fn served_version(&self, fleet: &FleetKey) -> Option<String> {
        self.cache.get(fleet).map(|snapshot| snapshot.version().to_owned())
    }

    fn list(&self) -> ProxyList {
        let proxies = self
            .connected()
            .map(|(fleet, proxy)| {
                let served_version = self.served_version(&fleet);
                ProxySummary {
                    in_sync: served_version.is_some() && proxy.applied_version == served_version,
                    rejecting: proxy
                        .types
                        .iter()
                        .filter(|(_, status)| status.rejecting)
                        .map(|(type_url, _)| short_type(type_url).to_owned())
                        .collect(),
                    node: proxy.node_id,
                    fleet: fleet.to_string(),
                    peer: proxy.peer.map(|peer| peer.to_string()),
                    applied_version: proxy.applied_version,
                    served_version,
                }
            })
            .collect();
        ProxyList { replica: self.replica.clone(), proxies }
    }

    fn configs(&self, node: &str) -> Vec<ProxyConfig> {
        self.connected()
            .filter(|(_, proxy)| proxy.node_id == node)
            .map(|(fleet, proxy)| self.config(&fleet, proxy))
            .collect()
    }

    fn config(&self, fleet: &FleetKey, proxy: ProxyStatus) -> ProxyConfig {
        let snapshot = self.cache.get(fleet);
        let served_version = snapshot.as_ref().map(|snapshot| snapshot.version().to_owned());
        let resources = snapshot
            .as_ref()
            .map(|snapshot| {
                snapshot
                    .type_urls()
                    .map(|type_url| TypeResources {
                        type_url: short_type(type_url).to_owned(),
                        resources: snapshot
                            .resources(type_url)
                            .iter()
                            .map(|resource| NamedVersion {
                                name: resource.name().to_owned(),
                                version: resource.version().to_owned(),
                            })
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let types = proxy
            .types
            .iter()
            .map(|(type_url, status)| TypeState {
                type_url: short_type(type_url).to_owned(),
                acked_version: status.acked_version.clone(),
                rejecting: status.rejecting,
                last_nack: status.last_nack.as_ref().map(nack_state),
            })
            .collect();
        ProxyConfig {
            replica: self.replica.clone(),
            node: proxy.node_id,
            fleet: fleet.to_string(),
            peer: proxy.peer.map(|peer| peer.to_string()),
            protocol: proxy.protocol.label().to_owned(),
            connected_since: rfc3339(proxy.connected_since),
            in_sync: served_version.is_some() && proxy.applied_version == served_version,
            applied_version: proxy.applied_version,
            served_version,
            types,
            resources,
            config: snapshot.and_then(|snapshot| snapshot.describe()),
        }
    }
}

fn nack_state(nack: &Nack) -> NackState {
    NackState { version: nack.version.clone(), message: nack.message.clone(), at: rfc3339(nack.at) }
}

/// `type.googleapis.com/envoy.config.cluster.v3.Cluster` → `envoy.config.cluster.v3.Cluster`.
fn short_type(type_url: &str) -> &str {
    type_url.rsplit_once('/').map_or(type_url, |(_, name)| name)
}

fn rfc3339(at: SystemTime) -> String {
    Timestamp::try_from(at).map_or_else(|_| "unknown".to_owned(), |at| at.to_string())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get(debug: &ProxyDebug, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty()).expect("a request");
        let response = debug.router().oneshot(request).await.expect("an answer");
        let status = response.status();
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn a_replica_without_a_control_plane_and_a_node_id_too_long_get_a_4xx_that_says_why() {
        let debug = ProxyDebug::default();
        let (status, body) = get(&debug, "/debug/proxies/edge-1").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("serves no xDS control plane"), "{body}");
        debug.serve("envoy-operator-0", SnapshotCache::new(), Tracker::new());
        let (status, body) = get(&debug, &format!("/debug/proxies/{}", "a".repeat(254))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(body.contains("at most 253 bytes"), "{body}");
        let (status, body) = get(&debug, "/debug/proxies").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, r#"{"replica":"envoy-operator-0","proxies":[]}"#)
        );
    }
}
