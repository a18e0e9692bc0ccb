//! Which fleet an xDS connection belongs to. A proxy proves its fleet with the client
//! certificate the operator's identity CA issued that fleet (checked at the TLS handshake,
//! [`crate::certs::client_auth`]); it is served that fleet and no other, and only while the
//! Envoy exists. The fleet its node metadata names (the bootstrap puts it there) must agree.
//!
//! Source addresses are not checked any more, not even as a second factor: a pod's address is
//! reused after the pod ends and reaches the pod cache only after the pod's first connections,
//! so checking it refused new proxies for seconds and trusted finished pods, while a stolen key
//! is as good from inside the fleet's namespace, where the certificate is mounted, as from
//! anywhere else.
//!
//! A mesh sidecar proves its ServiceAccount (`spiffe://…/ns/<namespace>/sa/<name>`) and is served
//! its namespace's mesh configuration, under [`mesh_fleet_key`] (`<namespace>/:mesh`, a name no
//! Envoy can have); its node marks it a mesh sidecar of that namespace
//! ([`MESH_METADATA_KEY`]) and claims no fleet. A mesh identity is never served a fleet, nor a
//! fleet's identity the mesh: a node claiming the other kind is refused.
//!
//! `--xds-insecure-node-identity` serves a connection without a client certificate the fleet
//! (or the namespace's mesh) its node metadata claims: for an Envoy started by hand, outside a
//! cluster, in development.
//!
//! Every refusal says the same to the client, whether or not the fleet exists, so a client
//! learns nothing about which Envoys there are; the reason is logged at debug, client strings
//! cut to a bound.

use envoy_operator_core::api::Envoy;
use envoy_operator_core::bootstrap::{FLEET_METADATA_KEY, MESH_METADATA_KEY};
use envoy_operator_core::bounded::echo;
use envoy_operator_core::children::labels;
use envoy_operator_core::identity::{FleetIdentity, mesh_fleet_key};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use std::net::IpAddr;
use tonic::Status;
use tracing::debug;

use super::report::ProxyRoles;
use crate::xds::server::{Authorizer, FleetKey, Peer, ProxyStatus};

/// The operator's authorizer, reading its caches (never the API).
pub struct FleetAuthorizer {
    pub envoys: Store<Envoy>,
    /// Serve a connection without a client certificate the fleet its node claims.
    pub insecure_node_identity: bool,
}

impl Authorizer for FleetAuthorizer {
    fn authorize(&self, node: &Node, peer: &Peer) -> Result<FleetKey, Status> {
        let claimed = claimed_fleet(node);
        let claimed_mesh = claimed_mesh(node);
        if let (Some(fleet), Some(_)) = (&claimed, &claimed_mesh) {
            return Err(refuse(node, &fleet.to_string(), "its node claims a fleet and the mesh", peer));
        }
        if let Some(namespace) = claimed_mesh.as_deref().filter(|namespace| !is_namespace(namespace)) {
            return Err(refuse(node, &mesh_fleet_key(namespace), "its node names no namespace's mesh", peer));
        }
        let proven_mesh = peer.identity.as_ref().filter(|identity| identity.is_mesh());
        match (proven_mesh, &claimed_mesh) {
            (Some(proven), _) => return self.serve_mesh(node, peer, proven, claimed.as_ref(), claimed_mesh),
            (None, Some(namespace)) => {
                let key = mesh_fleet_key(namespace);
                return match &peer.identity {
                    Some(_) => Err(refuse(node, &key, "a fleet's certificate claiming the mesh", peer)),
                    None if self.insecure_node_identity => Ok(FleetKey::from(key)),
                    None => Err(refuse(node, &key, "the connection carries no client certificate", peer)),
                };
            }
            (None, None) => {}
        }
        let fleet = match (&peer.identity, claimed) {
            (Some(proven), Some(claimed)) if *proven != claimed => {
                return Err(refuse(
                    node,
                    &claimed.to_string(),
                    "its node names another fleet than its certificate",
                    peer,
                ));
            }
            (Some(proven), _) => proven.clone(),
            (None, Some(claimed)) if self.insecure_node_identity => claimed,
            (None, Some(claimed)) => {
                return Err(refuse(
                    node,
                    &claimed.to_string(),
                    "the connection carries no client certificate",
                    peer,
                ));
            }
            (None, None) => {
                return Err(Status::permission_denied(format!(
                    "node {:?} names no fleet: its metadata has no {FLEET_METADATA_KEY} or {MESH_METADATA_KEY} (use the bootstrap the operator generates)",
                    echo(&node.id)
                )));
            }
        };
        if self.envoys.get(&ObjectRef::new(&fleet.name).within(&fleet.namespace)).is_none() {
            return Err(refuse(node, &fleet.to_string(), "there is no such Envoy", peer));
        }
        Ok(FleetKey::from(fleet.fleet_key()))
    }
}

impl FleetAuthorizer {
    /// A connection proving a mesh identity: served its namespace's mesh configuration, if its
    /// node claims no fleet and no other namespace's mesh. No object has to exist: every pod of
    /// an injected namespace may be a mesh sidecar, and what the namespace's mesh is (its
    /// routes, or none) is the configuration's business.
    fn serve_mesh(
        &self,
        node: &Node,
        peer: &Peer,
        proven: &FleetIdentity,
        claimed_fleet: Option<&FleetIdentity>,
        claimed_mesh: Option<String>,
    ) -> Result<FleetKey, Status> {
        let key = proven.fleet_key();
        if let Some(fleet) = claimed_fleet {
            return Err(refuse(
                node,
                &fleet.to_string(),
                "a mesh sidecar's certificate claiming a fleet",
                peer,
            ));
        }
        if let Some(namespace) = claimed_mesh.filter(|namespace| *namespace != proven.namespace) {
            return Err(refuse(
                node,
                &mesh_fleet_key(&namespace),
                "its node names another namespace's mesh than its certificate",
                peer,
            ));
        }
        Ok(FleetKey::from(key))
    }
}

/// The one refusal a client sees, whatever the reason; the reason is logged at debug.
fn refuse(node: &Node, fleet: &str, reason: &str, peer: &Peer) -> Status {
    let (node_id, fleet) = (echo(&node.id), echo(fleet));
    debug!(node = %node_id, %fleet, address = peer.address.map(display), proven = peer.identity.as_ref().map(|id| echo(&id.to_string()).into_owned()), reason, "refusing an xDS stream");
    Status::permission_denied(format!("node {node_id:?} is not served the fleet {fleet}"))
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

fn is_namespace(name: &str) -> bool {
    envoy_operator_core::rules::format::dns1123_label(name).is_empty()
}

/// The namespace whose mesh a node's metadata claims, if it claims one.
fn claimed_mesh(node: &Node) -> Option<String> {
    let claimed = node.metadata.as_ref()?.fields.get(MESH_METADATA_KEY)?;
    match &claimed.kind {
        Some(Kind::StringValue(namespace)) => Some(namespace.clone()),
        // Claimed, but not as a namespace: refused as no namespace's.
        _ => Some(String::new()),
    }
}

/// The fleet a node's metadata names (`<namespace>/<name>`), if it names one.
fn claimed_fleet(node: &Node) -> Option<FleetIdentity> {
    let claimed = node.metadata.as_ref()?.fields.get(FLEET_METADATA_KEY)?;
    let Some(Kind::StringValue(claimed)) = &claimed.kind else { return None };
    claimed
        .split_once('/')
        .filter(|(namespace, name)| !namespace.is_empty() && !name.is_empty() && !name.contains('/'))
        .map(|(namespace, name)| FleetIdentity::new(namespace, name))
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::{Struct, Value};
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    use std::net::SocketAddr;

    use envoy_operator_core::names::FLEET_LABEL;

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
        FleetAuthorizer { envoys, insecure_node_identity: insecure }
    }

    fn mesh_node(namespace: Option<&str>, fleet: Option<&str>) -> Node {
        let mut node = node(fleet);
        if let Some(namespace) = namespace {
            node.metadata.get_or_insert_default().fields.insert(
                MESH_METADATA_KEY.to_owned(),
                Value { kind: Some(Kind::StringValue(namespace.to_owned())) },
            );
        }
        node
    }

    fn proven_mesh(namespace: &str, service_account: &str) -> Peer {
        Peer { address: peer("10.1.0.8"), identity: Some(FleetIdentity::mesh(namespace, service_account)) }
    }

    fn proven(namespace: &str, name: &str) -> Peer {
        Peer { address: peer("10.1.0.7"), identity: Some(FleetIdentity::new(namespace, name)) }
    }

    fn anonymous() -> Peer {
        Peer { address: peer("10.1.0.7"), identity: None }
    }

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 40000))
    }

    #[test]
    fn a_proxy_is_served_the_fleet_its_certificate_names() {
        let authorizer = authorizer(false);
        let served = authorizer.authorize(&node(Some("shop/edge")), &proven("shop", "edge")).unwrap();
        assert_eq!(served, FleetKey::from("shop/edge"));
        // Whatever address it comes from: the certificate is the identity.
        let elsewhere = Peer { address: peer("192.0.2.1"), ..proven("shop", "edge") };
        assert!(authorizer.authorize(&node(Some("shop/edge")), &elsewhere).is_ok());
        // A node without a claim gets the fleet it proved.
        assert_eq!(authorizer.authorize(&node(None), &proven("shop", "edge")).unwrap(), served);
    }

    #[test]
    fn a_claim_of_another_fleet_is_refused_whatever_the_certificate() {
        let authorizer = authorizer(true);
        for (claim, identity) in
            [("shop/edge", proven("shop", "other")), ("shop/other", proven("shop", "edge"))]
        {
            let refused = authorizer.authorize(&node(Some(claim)), &identity).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{claim}");
        }
    }

    #[test]
    fn without_a_certificate_only_the_insecure_mode_believes_the_claim() {
        let refused = authorizer(false).authorize(&node(Some("shop/edge")), &anonymous()).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert_eq!(
            authorizer(true).authorize(&node(Some("shop/edge")), &anonymous()).unwrap(),
            FleetKey::from("shop/edge")
        );
        let unnamed = authorizer(true).authorize(&node(Some("edge")), &anonymous()).unwrap_err();
        assert!(unnamed.message().contains("names no fleet"), "{}", unnamed.message());
    }

    /// A client learns nothing of which Envoys exist: refusals read the same.
    #[test]
    fn every_refusal_reads_the_same_whether_or_not_the_envoy_exists() {
        let message = |authorizer: &FleetAuthorizer, claim: &str, peer: &Peer| {
            let refused = authorizer.authorize(&node(Some(claim)), peer).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied);
            refused.message().replace(claim, "<fleet>")
        };
        let (secure, insecure) = (authorizer(false), authorizer(true));
        let no_such_envoy = message(&insecure, "shop/gone", &anonymous());
        assert_eq!(message(&secure, "shop/edge", &anonymous()), no_such_envoy);
        assert_eq!(message(&secure, "shop/gone", &anonymous()), no_such_envoy);
        assert_eq!(message(&secure, "shop/gone", &proven("shop", "gone")), no_such_envoy);
        assert_eq!(
            message(&secure, "shop/edge", &proven("shop", "gone")),
            no_such_envoy,
            "a claim against the certificate"
        );
        assert_eq!(no_such_envoy, "node \"edge-7d9f-abcde\" is not served the fleet <fleet>");
    }

    #[test]
    fn a_mesh_identity_is_served_its_namespaces_mesh_and_nothing_else() {
        let authorizer = authorizer(false);
        let served =
            authorizer.authorize(&mesh_node(Some("shop"), None), &proven_mesh("shop", "web")).unwrap();
        assert_eq!(served, FleetKey::from(mesh_fleet_key("shop")));
        assert_eq!(served, FleetKey::from("shop/:mesh"));
        // Whatever its ServiceAccount, and with a node that claims nothing.
        assert_eq!(authorizer.authorize(&node(None), &proven_mesh("shop", "checkout")).unwrap(), served);
        // Another namespace's mesh, a fleet, or both: refused.
        for (node, why) in [
            (mesh_node(Some("bank"), None), "another namespace's mesh"),
            (mesh_node(None, Some("shop/edge")), "a fleet, though its namespace has it"),
            (mesh_node(Some("shop"), Some("shop/edge")), "a fleet and the mesh"),
            (mesh_node(None, Some("shop/:mesh")), "the mesh's key as a fleet"),
            (mesh_node(Some(""), None), "no namespace"),
        ] {
            let refused = authorizer.authorize(&node, &proven_mesh("shop", "web")).unwrap_err();
            assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{why}");
        }
    }

    #[test]
    fn a_fleet_identity_is_never_served_the_mesh() {
        for insecure in [false, true] {
            let authorizer = authorizer(insecure);
            for node in [mesh_node(Some("shop"), None), mesh_node(Some("shop"), Some("shop/edge"))] {
                let refused = authorizer.authorize(&node, &proven("shop", "edge")).unwrap_err();
                assert_eq!(refused.code(), tonic::Code::PermissionDenied);
            }
        }
        // And a fleet's configuration never reaches a mesh identity, even of the same name.
        let refused = authorizer(true).authorize(&node(Some("shop/edge")), &proven_mesh("shop", "edge"));
        assert_eq!(refused.unwrap_err().code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn without_a_certificate_only_the_insecure_mode_serves_the_mesh_claimed() {
        let refused = authorizer(false).authorize(&mesh_node(Some("shop"), None), &anonymous()).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert_eq!(refused.message(), "node \"edge-7d9f-abcde\" is not served the fleet shop/:mesh");
        assert_eq!(
            authorizer(true).authorize(&mesh_node(Some("shop"), None), &anonymous()).unwrap(),
            FleetKey::from("shop/:mesh")
        );
        let bad = authorizer(true).authorize(&mesh_node(Some("Shop/x"), None), &anonymous()).unwrap_err();
        assert_eq!(bad.code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn client_strings_are_quoted_within_a_bound() {
        let mut long = node(Some("shop/edge"));
        long.id = "x".repeat(100_000);
        let huge_claim = format!("shop/{}", "y".repeat(100_000));
        for refused in [
            authorizer(false).authorize(&long, &anonymous()).unwrap_err(),
            authorizer(true).authorize(&node(Some(&huge_claim)), &anonymous()).unwrap_err(),
            authorizer(false).authorize(&long, &proven("shop", "other")).unwrap_err(),
        ] {
            assert!(refused.message().len() < 1024, "{} bytes", refused.message().len());
        }
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
            protocol: crate::xds::server::Protocol::Delta,
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
}
