//! Which fleet an xDS connection belongs to, and whether to believe it. A proxy names its fleet
//! in its node metadata (the bootstrap puts it there); by default the connection is served only
//! if its source address is a pod of that fleet (the fleet's own, or one whose sidecar names
//! that Envoy: both carry [`FLEET_LABEL`]), so a pod cannot read another fleet's configuration
//! by claiming its name. `--xds-insecure-node-identity` believes the metadata as is: for an
//! Envoy started by hand from a fleet's bootstrap, outside a cluster.
//!
//! A new pod's first connections usually come before its address reaches the pod cache. An
//! address no cached pod has is answered `UNAVAILABLE` (Envoy retries, and is served once the
//! cache has the pod), counted as `unknown_source` and logged at debug: only an address that a
//! known pod of another fleet (or namespace) has is `PERMISSION_DENIED`, a real mismatch.
//!
//! Node ids and claims come from the client: messages quote them cut to a bound.

use std::net::{IpAddr, SocketAddr};

use envoy_operator_core::api::Envoy;
use envoy_operator_core::bootstrap::FLEET_METADATA_KEY;
use envoy_operator_core::bounded::echo;
use envoy_operator_core::children::labels;
use envoy_operator_core::names::FLEET_LABEL;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tonic::Status;

use super::report::ProxyRoles;
use crate::xds_server::{Authorizer, FleetKey, ProxyStatus};

/// The operator's authorizer, reading its caches (never the API).
pub struct FleetAuthorizer {
    pub envoys: Store<Envoy>,
    /// Pods carrying [`FLEET_LABEL`].
    pub pods: Store<Pod>,
    /// Believe the node's claim without checking its address.
    pub insecure_node_identity: bool,
}

impl Authorizer for FleetAuthorizer {
    fn authorize(&self, node: &Node, peer: Option<SocketAddr>) -> Result<FleetKey, Status> {
        let (namespace, name) = claimed_fleet(node)?;
        if self.envoys.get(&ObjectRef::new(name).within(namespace)).is_none() {
            return Err(Status::permission_denied(format!(
                "node {:?} names the fleet {}/{}, and there is no such Envoy",
                echo(&node.id),
                echo(namespace),
                echo(name)
            )));
        }
        if !self.insecure_node_identity {
            let ip = peer.map(|peer| peer.ip()).ok_or_else(|| {
                Status::permission_denied("the connection's source address is unknown: it cannot be checked")
            })?;
            match self.source(ip, namespace, name) {
                Source::OfTheFleet => {}
                Source::Unknown => {
                    return Err(Status::unavailable(format!(
                        "{ip} is no pod the operator has seen yet (a new pod's address reaches it within \
                         seconds): node {:?} of the fleet {namespace}/{name} is served once it has",
                        echo(&node.id)
                    )));
                }
                Source::Other => {
                    return Err(Status::permission_denied(format!(
                        "{ip} is no pod of the fleet {namespace}/{name} (nor one whose sidecar names it): \
                         node {:?} is refused its configuration",
                        echo(&node.id)
                    )));
                }
            }
        }
        Ok(FleetKey::from(format!("{namespace}/{name}")))
    }
}

/// What the pod cache knows of a connection's source address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// A pod of the claimed fleet has it.
    OfTheFleet,
    /// Only pods of other fleets or namespaces have it.
    Other,
    /// No cached pod has it: a pod too new for the cache, or no fleet pod at all.
    Unknown,
}

impl FleetAuthorizer {
    fn source(&self, ip: IpAddr, namespace: &str, name: &str) -> Source {
        let mut source = Source::Unknown;
        for pod in self.pods.state() {
            if !pod_ips(&pod).any(|pod_ip| pod_ip == ip) {
                continue;
            }
            if pod.namespace().as_deref() == Some(namespace)
                && pod.labels().get(FLEET_LABEL).map(String::as_str) == Some(name)
            {
                return Source::OfTheFleet;
            }
            source = Source::Other;
        }
        source
    }
}

/// Tells sidecars from the fleet's own proxies by the pod cache: a proxy's node id is its pod's
/// name, believed only when that pod has the connection's address; the fleet's own pods carry
/// the labels of its Deployment. A proxy whose pod is not found counts as the fleet's own.
pub struct PodRoles {
    /// Pods carrying [`FLEET_LABEL`].
    pub pods: Store<Pod>,
}

impl ProxyRoles for PodRoles {
    fn is_sidecar(&self, fleet: &FleetKey, proxy: &ProxyStatus) -> bool {
        let Some((namespace, envoy)) = fleet.as_str().split_once('/') else { return false };
        let Some(pod) = self.pods.get(&ObjectRef::new(&proxy.node_id).within(namespace)) else {
            return false;
        };
        let its_own = proxy.peer.is_some_and(|peer| pod_ips(&pod).any(|ip| ip == peer.ip()));
        let fleet_pod =
            labels::envoy_selector(envoy).iter().all(|(key, value)| pod.labels().get(key) == Some(value));
        its_own && !fleet_pod
    }
}

fn pod_ips(pod: &Pod) -> impl Iterator<Item = IpAddr> + '_ {
    let status = pod.status.as_ref();
    let single = status.and_then(|s| s.pod_ip.as_deref());
    let many = status.and_then(|s| s.pod_ips.as_ref()).into_iter().flatten().map(|ip| ip.ip.as_str());
    single.into_iter().chain(many).filter_map(|ip| ip.parse().ok())
}

/// The `<namespace>/<name>` a node's metadata names.
fn claimed_fleet(node: &Node) -> Result<(&str, &str), Status> {
    let claimed = node
        .metadata
        .as_ref()
        .and_then(|metadata| metadata.fields.get(FLEET_METADATA_KEY))
        .and_then(|value| match &value.kind {
            Some(Kind::StringValue(fleet)) => Some(fleet.as_str()),
            _ => None,
        })
        .ok_or_else(|| {
            Status::permission_denied(format!(
                "node {:?} names no fleet: its metadata has no {FLEET_METADATA_KEY} (use the bootstrap the operator generates)",
                echo(&node.id)
            ))
        })?;
    claimed
        .split_once('/')
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| {
            Status::permission_denied(format!("{:?} is not a fleet (<namespace>/<Envoy>)", echo(claimed)))
        })
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::{Struct, Value};
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    use super::*;

    fn node(fleet: Option<&str>) -> Node {
        let metadata = fleet.map(|fleet| Struct {
            fields: [(
                FLEET_METADATA_KEY.to_owned(),
                Value { kind: Some(Kind::StringValue(fleet.to_owned())) },
            )]
            .into(),
        });
        Node { id: "edge-7d9f-abcde".into(), metadata, ..Default::default() }
    }

    fn store<K>(objects: Vec<serde_json::Value>) -> Store<K>
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned,
    {
        let (reader, mut writer) = reflector::store::<K>();
        for object in objects {
            writer.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(object).unwrap()));
        }
        reader
    }

    fn authorizer(insecure: bool) -> FleetAuthorizer {
        let envoys = store(vec![json!({"apiVersion": "example.com/v1", "kind": "Envoy",
            "metadata": {"name": "edge", "namespace": "shop"}, "spec": {}})]);
        let pods = store(vec![
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "edge-1", "namespace": "shop",
                "labels": {FLEET_LABEL: "edge"}}, "spec": {"containers": []}, "status": {"podIP": "10.1.0.7"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other-1", "namespace": "shop",
                "labels": {FLEET_LABEL: "other"}}, "spec": {"containers": []}, "status": {"podIPs": [{"ip": "10.1.0.8"}]}}),
        ]);
        FleetAuthorizer { envoys, pods, insecure_node_identity: insecure }
    }

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 40000))
    }

    #[test]
    fn a_pod_of_the_fleet_gets_its_configuration() {
        let fleet = authorizer(false).authorize(&node(Some("shop/edge")), peer("10.1.0.7")).unwrap();
        assert_eq!(fleet, FleetKey::from("shop/edge"));
    }

    #[test]
    fn another_fleets_pod_is_refused() {
        let refused = authorizer(false).authorize(&node(Some("shop/edge")), peer("10.1.0.8")).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(refused.message().contains("is no pod of the fleet shop/edge"), "{}", refused.message());
    }

    /// A new pod connects before its address reaches the cache: it is told to retry, not
    /// refused as an impostor (and counted apart, see `super::super::metrics`).
    #[test]
    fn an_address_no_cached_pod_has_yet_is_told_to_retry() {
        let authorizer = authorizer(false);
        let retry = authorizer.authorize(&node(Some("shop/edge")), peer("10.9.9.9")).unwrap_err();
        assert_eq!(retry.code(), tonic::Code::Unavailable);
        assert!(retry.message().contains("no pod the operator has seen yet"), "{}", retry.message());
        // The same address once the pod is cached is served.
        let (pods, mut writer) = reflector::store::<Pod>();
        writer.apply_watcher_event(&watcher::Event::Apply(
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "edge-2",
                "namespace": "shop", "labels": {FLEET_LABEL: "edge"}}, "status": {"podIP": "10.9.9.9"}}))
            .unwrap(),
        ));
        let later = FleetAuthorizer { pods, ..authorizer };
        assert!(later.authorize(&node(Some("shop/edge")), peer("10.9.9.9")).is_ok());
    }

    /// A sidecar is a pod naming the Envoy, not one of the fleet's Deployment; told by the pod
    /// the node id names, if it has the connection's address.
    #[test]
    fn sidecars_are_told_from_the_fleets_own_proxies() {
        let pods = store(vec![
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "edge-7f-x", "namespace": "shop",
                "labels": {FLEET_LABEL: "edge", "app.kubernetes.io/name": "envoy", "app.kubernetes.io/instance": "edge"}},
                "status": {"podIP": "10.1.0.7"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app-1", "namespace": "shop",
                "labels": {FLEET_LABEL: "edge", "app": "shop"}}, "status": {"podIP": "10.1.0.9"}}),
        ]);
        let roles = PodRoles { pods };
        let proxy = |node: &str, ip: &str| ProxyStatus {
            node_id: node.into(),
            peer: peer(ip),
            protocol: crate::xds_server::Protocol::Delta,
            connected_since: std::time::SystemTime::now(),
            applied_version: None,
            types: Default::default(),
        };
        let fleet = FleetKey::from("shop/edge");
        assert!(roles.is_sidecar(&fleet, &proxy("app-1", "10.1.0.9")));
        assert!(!roles.is_sidecar(&fleet, &proxy("edge-7f-x", "10.1.0.7")));
        // A node id is the proxy's word: from another address, or naming no pod, the proxy
        // counts as the fleet's own.
        assert!(!roles.is_sidecar(&fleet, &proxy("app-1", "10.1.0.7")));
        assert!(!roles.is_sidecar(&fleet, &proxy("gone", "10.1.0.9")));
    }

    #[test]
    fn client_strings_are_quoted_within_a_bound() {
        let mut long = node(Some("shop/edge"));
        long.id = "x".repeat(100_000);
        for refused in [
            authorizer(false).authorize(&long, peer("10.1.0.8")).unwrap_err(),
            authorizer(false).authorize(&long, peer("10.9.9.9")).unwrap_err(),
            authorizer(false).authorize(&node(Some(&"y".repeat(100_000))), peer("10.1.0.7")).unwrap_err(),
        ] {
            assert!(refused.message().len() < 1024, "{} bytes", refused.message().len());
        }
    }

    #[test]
    fn the_claim_must_name_an_existing_envoy() {
        let authorizer = authorizer(true);
        assert!(
            authorizer
                .authorize(&node(None), peer("10.1.0.7"))
                .unwrap_err()
                .message()
                .contains("names no fleet")
        );
        assert!(
            authorizer
                .authorize(&node(Some("shop/gone")), None)
                .unwrap_err()
                .message()
                .contains("no such Envoy")
        );
        assert!(authorizer.authorize(&node(Some("edge")), None).is_err());
        assert_eq!(
            authorizer.authorize(&node(Some("shop/edge")), None).unwrap(),
            FleetKey::from("shop/edge")
        );
    }
}
