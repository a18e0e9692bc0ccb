//! A Gateway's fleet: the Envoy the operator applies for it, named after the Gateway, labelled
//! [`GATEWAY_LABEL`] with its name and owned by it, with one port per port of its listeners; and
//! what the stored fleet and its Service say of the Gateway (ready, addresses).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::api::{Gateway, GatewayStatusAddress};
use super::listeners::JudgedListener;
use crate::api::{Envoy, EnvoySpec, ServicePort, ServiceType};
use crate::names::{GATEWAY_LABEL, MANAGED_BY, MANAGED_BY_KEY};
use crate::rules::{Rules, defaulted, format};

/// `status.addresses` types.
pub const IP_ADDRESS: &str = "IPAddress";
pub const HOSTNAME: &str = "Hostname";

/// The fleet's ports: one per Gateway port with a listener the Service exposes, sorted by port,
/// each named after its protocol and port (`http-80`) and bound on its container port.
pub fn ports(listeners: &[JudgedListener]) -> Vec<ServicePort> {
    let mut ports: BTreeMap<i32, ServicePort> = BTreeMap::new();
    for listener in listeners.iter().filter(|listener| listener.exposed()) {
        ports.entry(listener.port).or_insert_with(|| ServicePort {
            name: listener.port_name(),
            port: listener.port,
            target_port: Some(listener.container_port),
        });
    }
    ports.into_values().collect()
}

/// The Envoy to apply for `gateway`'s fleet, with `ports` and the settings of `template` (the
/// class's parameters): `replicas`, `image`, `resources`, `serviceType` (else `LoadBalancer`)
/// and `accessLog`. An error says why the Gateway cannot have one (its name cannot name an
/// Envoy's Deployment and Service).
pub fn desired(
    gateway: &Gateway,
    ports: Vec<ServicePort>,
    template: Option<&Envoy>,
) -> Result<Envoy, String> {
    let name = gateway.metadata.name.clone().unwrap_or_default();
    let reasons = format::dns1123_label(&name);
    if !reasons.is_empty() {
        return Err(format!(
            "the Gateway's name {name:?} cannot name its fleet's Deployment and Service: {}",
            reasons.join(", ")
        ));
    }
    let template = template.map(|envoy| &envoy.spec);
    let envoy = Envoy {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: gateway.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (GATEWAY_LABEL.to_owned(), name.clone()),
                (MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: Gateway::api_version(&()).into_owned(),
                kind: Gateway::kind(&()).into_owned(),
                name: name.clone(),
                uid: gateway.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                // Not `blockOwnerDeletion`: where OwnerReferencesPermissionEnforcement is on, it
                // takes `update` on `gateways/finalizers`, and the fleet need not outlive a
                // foreground deletion's wait.
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: EnvoySpec {
            replicas: template.and_then(|t| t.replicas),
            image: template.and_then(|t| t.image.clone()),
            ports,
            service_type: template.and_then(|t| t.service_type).or(Some(ServiceType::LoadBalancer)),
            resources: template.and_then(|t| t.resources.clone()),
            access_log: template.and_then(|t| t.access_log),
            ..Default::default()
        },
        status: None,
    };
    match defaulted(envoy.clone()).validate(None) {
        Ok(_) => Ok(envoy),
        Err(errors) => Err(format!(
            "the Gateway's fleet, an Envoy of the same name, cannot be made: {}",
            errors.message("Envoy", &name)
        )),
    }
}

/// The Envoy of the Gateway's name in its namespace, if any.
pub fn stored<'a>(gateway: &Gateway, fleets: &'a [Arc<Envoy>]) -> Option<&'a Envoy> {
    fleets
        .iter()
        .find(|envoy| {
            envoy.metadata.namespace == gateway.metadata.namespace
                && envoy.metadata.name == gateway.metadata.name
        })
        .map(AsRef::as_ref)
}

/// Whether `envoy` is the fleet of the Gateway `name` of uid `uid`: labelled with its name, and
/// controlled by it (a Gateway's controller ownerReference of that uid). A Gateway not stored
/// yet (no uid) is judged by the label alone. The translation and the fleet controller both
/// ask this, so what one serves the other applies.
pub fn is_fleet_of(envoy: &Envoy, name: &str, uid: Option<&str>) -> bool {
    let labelled = envoy
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(GATEWAY_LABEL))
        .is_some_and(|label| label == name);
    let controlled = |uid: &str| {
        envoy.metadata.owner_references.iter().flatten().any(|owner| {
            owner.controller == Some(true)
                && owner.uid == uid
                && owner.kind == Gateway::kind(&())
                && owner.api_version == Gateway::api_version(&())
        })
    };
    labelled && uid.is_none_or(controlled)
}

/// Whether the stored fleet has a ready proxy.
pub fn ready(envoy: &Envoy) -> bool {
    envoy.status.as_ref().and_then(|status| status.ready_replicas).is_some_and(|ready| ready >= 1)
}

/// The addresses of the fleet's Service (named after the Gateway): its load balancer's, else
/// its cluster IP.
pub fn addresses(gateway: &Gateway, services: &[Arc<Service>]) -> Vec<GatewayStatusAddress> {
    let Some(service) = services.iter().find(|service| {
        service.metadata.namespace == gateway.metadata.namespace
            && service.metadata.name == gateway.metadata.name
    }) else {
        return Vec::new();
    };
    let address = |address_type: &str, value: &str| GatewayStatusAddress {
        address_type: address_type.to_owned(),
        value: value.to_owned(),
    };
    let ingress =
        service.status.as_ref().and_then(|s| s.load_balancer.as_ref()).and_then(|lb| lb.ingress.as_ref());
    let mut addresses: Vec<GatewayStatusAddress> = ingress
        .into_iter()
        .flatten()
        .filter_map(|ingress| match (&ingress.ip, &ingress.hostname) {
            (Some(ip), _) if !ip.is_empty() => Some(address(IP_ADDRESS, ip)),
            (_, Some(hostname)) if !hostname.is_empty() => Some(address(HOSTNAME, hostname)),
            _ => None,
        })
        .collect();
    if addresses.is_empty()
        && let Some(cluster_ip) = service.spec.as_ref().and_then(|spec| spec.cluster_ip.as_deref())
        && !cluster_ip.is_empty()
        && cluster_ip != "None"
    {
        addresses.push(address(IP_ADDRESS, cluster_ip));
    }
    addresses
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envoy(label: Option<&str>, owner_uid: &str, owner_kind: &str) -> Envoy {
        let mut envoy = Envoy::new("edge", Default::default());
        envoy.metadata.labels =
            label.map(|label| [(GATEWAY_LABEL.to_owned(), label.to_owned())].into_iter().collect());
        envoy.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "gateway.networking.k8s.io/v1".into(),
            kind: owner_kind.into(),
            name: "edge".into(),
            uid: owner_uid.into(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
        envoy
    }

    #[test]
    fn a_fleet_is_labelled_with_its_gateway_and_controlled_by_its_uid() {
        assert!(is_fleet_of(&envoy(Some("edge"), "u1", "Gateway"), "edge", Some("u1")));
        assert!(
            !is_fleet_of(&envoy(Some("edge"), "u2", "Gateway"), "edge", Some("u1")),
            "another Gateway's uid"
        );
        assert!(!is_fleet_of(&envoy(None, "u1", "Gateway"), "edge", Some("u1")), "not labelled");
        assert!(!is_fleet_of(&envoy(Some("other"), "u1", "Gateway"), "edge", Some("u1")), "another label");
        assert!(!is_fleet_of(&envoy(Some("edge"), "u1", "Foo"), "edge", Some("u1")), "owned by another kind");
    }
}
