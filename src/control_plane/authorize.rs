//! Which fleet an xDS connection belongs to, and whether to believe it. A proxy names its fleet
//! in its node metadata (the bootstrap puts it there); by default the connection is served only
//! if its source address is a pod of that fleet (the fleet's own, or one whose sidecar names
//! that Envoy: both carry [`FLEET_LABEL`]), so a pod cannot read another fleet's configuration
//! by claiming its name. `--xds-insecure-node-identity` believes the metadata as is: for an
//! Envoy started by hand from a fleet's bootstrap, outside a cluster.

use std::net::{IpAddr, SocketAddr};

use envoy_operator_core::api::Envoy;
use envoy_operator_core::bootstrap::FLEET_METADATA_KEY;
use envoy_operator_core::names::FLEET_LABEL;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use tonic::Status;

use crate::xds_server::{Authorizer, FleetKey};

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
                "node {:?} names the fleet {namespace}/{name}, and there is no such Envoy",
                node.id
            )));
        }
        if !self.insecure_node_identity {
            let ip = peer.map(|peer| peer.ip()).ok_or_else(|| {
                Status::permission_denied("the connection's source address is unknown: it cannot be checked")
            })?;
            if !self.is_pod_of(ip, namespace, name) {
                return Err(Status::permission_denied(format!(
                    "{ip} is no pod of the fleet {namespace}/{name} (nor one whose sidecar names it): \
                     node {:?} is refused its configuration",
                    node.id
                )));
            }
        }
        Ok(FleetKey::from(format!("{namespace}/{name}")))
    }
}

impl FleetAuthorizer {
    fn is_pod_of(&self, ip: IpAddr, namespace: &str, name: &str) -> bool {
        self.pods.state().iter().any(|pod| {
            pod.namespace().as_deref() == Some(namespace)
                && pod.labels().get(FLEET_LABEL).map(String::as_str) == Some(name)
                && pod_ips(pod).any(|pod_ip| pod_ip == ip)
        })
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
                node.id
            ))
        })?;
    claimed
        .split_once('/')
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty() && !name.contains('/'))
        .ok_or_else(|| Status::permission_denied(format!("{claimed:?} is not a fleet (<namespace>/<Envoy>)")))
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
    fn another_fleets_pod_or_a_stranger_is_refused() {
        for ip in ["10.1.0.8", "10.9.9.9"] {
            let refused = authorizer(false).authorize(&node(Some("shop/edge")), peer(ip)).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied);
            assert!(refused.message().contains("is no pod of the fleet shop/edge"), "{}", refused.message());
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
