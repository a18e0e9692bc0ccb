//! A Gateway's fleet: the Envoy the operator applies for it, named `<gateway>-<class>`
//! ([`name`]), labelled [`GATEWAY_LABEL`] with the Gateway's name and owned by it, with one port
//! per port of its listeners; and what the stored fleet and the Service it controls say of the
//! Gateway (ready, addresses, a child it could not make).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use sha2::{Digest, Sha256};

use super::listeners::JudgedListener;
use crate::api::gateway::{Gateway, GatewayStatusAddress};
use crate::api::{ChildMetadata, Envoy, EnvoySpec, ServicePort, ServiceType};
use crate::children::status::{
    DEGRADED, REASON_ADDRESS_NOT_USABLE, REASON_INVALID_SPEC, REASON_RESOURCE_EXISTS,
};
use crate::names::{GATEWAY_LABEL, GATEWAY_NAME_LABEL, MANAGED_BY, MANAGED_BY_KEY};
use crate::rules::envoy::child_metadata_errors;
use crate::rules::{FieldError, MAX_LABEL_VALUE, Rules, defaulted};

/// `status.addresses` types.
pub const IP_ADDRESS: &str = "IPAddress";
pub const HOSTNAME: &str = "Hostname";

/// The longest name a fleet may have: it names the fleet's Service, a DNS-1035 label.
const MAX_NAME: usize = 63;
/// Hex digits of the hash that ends a name that had to be shortened or spelled differently.
const HASH_DIGITS: usize = 8;

/// The name of the fleet of the Gateway `gateway` of the class `class`: its Envoy, Deployment
/// and Service. `<gateway>-<class>`, as Istio names a Gateway's deployment, so it does not take
/// the name of a Service of the Gateway's own name (the one the users' routes most likely send
/// to). Where that is no DNS-1035 label (the Service's rule: at most 63 characters, lowercase
/// letters, digits and '-', starting with a letter), the name is spelled as one (a dot, or any
/// other character, becomes '-'; a leading digit gets `gw-`), shortened, and ends with a hash of the Gateway's and
/// class's names, so two Gateways never share it.
pub fn name(gateway: &str, class: &str) -> String {
    let plain = format!("{gateway}-{class}");
    let spelled: String =
        plain.chars().map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() { c } else { '-' }).collect();
    let spelled = match spelled.starts_with(|c: char| c.is_ascii_lowercase()) {
        true => spelled,
        false => format!("gw-{spelled}"),
    };
    if spelled == plain && plain.len() <= MAX_NAME && plain.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        return plain;
    }
    let digest = Sha256::digest(format!("{gateway}/{class}").as_bytes());
    let hash: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
    let kept = &spelled[..spelled.len().min(MAX_NAME - HASH_DIGITS - 1)];
    format!("{}-{}", kept.trim_end_matches('-'), &hash[..HASH_DIGITS])
}

/// The name of `gateway`'s fleet ([`name`]).
pub fn name_of(gateway: &Gateway) -> String {
    name(gateway.metadata.name.as_deref().unwrap_or_default(), &gateway.spec.gateway_class_name)
}

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
/// and `accessLog`; and `cluster_ip`, the Gateway's static address. An error says why the Gateway cannot have one (its name cannot label it).
pub fn desired(
    gateway: &Gateway,
    ports: Vec<ServicePort>,
    template: Option<&Envoy>,
    cluster_ip: Option<String>,
) -> Result<Envoy, String> {
    let name = gateway.metadata.name.clone().unwrap_or_default();
    // A Gateway's name is a DNS subdomain: one of at most 63 characters is a label value.
    if name.len() > MAX_LABEL_VALUE {
        return Err(format!(
            "the Gateway's name is longer than {MAX_LABEL_VALUE} characters: it cannot label its fleet ({GATEWAY_LABEL})"
        ));
    }
    let child_metadata = child_metadata(gateway)?;
    let fleet_name = name_of(gateway);
    let template = template.map(|envoy| &envoy.spec);
    let envoy = Envoy {
        metadata: ObjectMeta {
            name: Some(fleet_name.clone()),
            namespace: gateway.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (GATEWAY_LABEL.to_owned(), name.clone()),
                (GATEWAY_NAME_LABEL.to_owned(), name.clone()),
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
            child_metadata: Some(child_metadata),
            service_cluster_ip: cluster_ip,
            ..Default::default()
        },
        status: None,
    };
    match defaulted(envoy.clone()).validate(None) {
        Ok(_) => Ok(envoy),
        Err(errors) => Err(format!(
            "the Gateway's fleet, the Envoy {fleet_name}, cannot be made: {}",
            errors.message("Envoy", &fleet_name)
        )),
    }
}

/// Labels, and annotations, `spec.infrastructure` may hold (the API's `maxProperties`).
pub const MAX_INFRASTRUCTURE_METADATA: usize = 8;

/// What every object of `gateway`'s fleet carries of it: Gateway API's gateway-name label
/// (GEP-1762) and `spec.infrastructure`'s labels and annotations. An error says why those
/// cannot be used: more than the API allows, keys or label values the API server would refuse
/// on the objects (the API's schema checks them too, but a Gateway stored before it did, or
/// under a looser CRD, must not make every apply of its fleet fail), or keys the operator sets.
pub fn child_metadata(gateway: &Gateway) -> Result<ChildMetadata, String> {
    let name = gateway.metadata.name.clone().unwrap_or_default();
    let infrastructure = gateway.spec.infrastructure.clone().unwrap_or_default();
    let given = ChildMetadata { labels: infrastructure.labels, annotations: infrastructure.annotations };
    let mut errors = child_metadata_errors(&given, "spec.infrastructure");
    for (field, count) in [("labels", given.labels.len()), ("annotations", given.annotations.len())] {
        if count > MAX_INFRASTRUCTURE_METADATA {
            errors.push(FieldError::forbidden(
                format!("spec.infrastructure.{field}"),
                format!("must have at most {MAX_INFRASTRUCTURE_METADATA} items"),
            ));
        }
    }
    if given.labels.contains_key(GATEWAY_NAME_LABEL) {
        errors.push(FieldError::forbidden(
            format!("spec.infrastructure.labels[{GATEWAY_NAME_LABEL}]"),
            format!("{GATEWAY_NAME_LABEL} is set by the operator on the fleet's objects"),
        ));
    }
    if !errors.is_empty() {
        return Err(format!("spec.infrastructure cannot be carried to the fleet's objects: {errors}"));
    }
    let mut labels = given.labels;
    labels.insert(GATEWAY_NAME_LABEL.to_owned(), name);
    Ok(ChildMetadata { labels, annotations: given.annotations })
}

/// The Envoy of the fleet's name ([`name_of`]) in the Gateway's namespace, if any: its fleet, or
/// someone else's Envoy in its way.
pub fn stored<'a>(gateway: &Gateway, fleets: &'a [Arc<Envoy>]) -> Option<&'a Envoy> {
    let name = name_of(gateway);
    fleets
        .iter()
        .find(|envoy| {
            envoy.metadata.namespace == gateway.metadata.namespace
                && envoy.metadata.name.as_deref() == Some(name.as_str())
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

/// What stops the stored fleet from making its children, as its `Degraded` condition says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked<'a> {
    /// A child's name held by an object it does not control (a user's Service or Deployment of
    /// the fleet's name), or a spec its rules refuse.
    Children(&'a str),
    /// The API server refuses the Service's cluster IP (the Gateway's static address).
    Address(&'a str),
}

/// What stops the stored fleet from making its children; `None` when nothing does.
pub fn blocked(envoy: &Envoy) -> Option<Blocked<'_>> {
    let conditions = envoy.status.as_ref().map(|status| status.conditions.as_slice()).unwrap_or_default();
    conditions.iter().filter(|condition| condition.type_ == DEGRADED && condition.status == "True").find_map(
        |condition| match condition.reason.as_str() {
            REASON_RESOURCE_EXISTS | REASON_INVALID_SPEC => Some(Blocked::Children(&condition.message)),
            REASON_ADDRESS_NOT_USABLE => Some(Blocked::Address(&condition.message)),
            _ => None,
        },
    )
}

/// The Service `fleet` (the stored fleet) controls. Only a Service of the fleet's name with the
/// fleet's controller ownerReference (its uid) counts: one of that name that someone else made
/// is not the Gateway's.
pub fn service<'a>(fleet: &Envoy, services: &'a [Arc<Service>]) -> Option<&'a Service> {
    let service_name = fleet.spec.name.as_ref().or(fleet.metadata.name.as_ref());
    let controlled = |service: &Service| {
        service.metadata.owner_references.iter().flatten().any(|owner| {
            owner.controller == Some(true)
                && owner.kind == Envoy::kind(&())
                && owner.api_version == Envoy::api_version(&())
                && fleet.metadata.uid.as_ref() == Some(&owner.uid)
        })
    };
    services
        .iter()
        .find(|service| {
            service.metadata.namespace == fleet.metadata.namespace
                && service.metadata.name.as_ref() == service_name
                && controlled(service)
        })
        .map(AsRef::as_ref)
}

/// The Service's cluster IP, if it has one.
pub fn cluster_ip(service: &Service) -> Option<&str> {
    service.spec.as_ref()?.cluster_ip.as_deref().filter(|ip| !ip.is_empty() && *ip != "None")
}

/// The addresses of the fleet's Service: its load balancer's, else its cluster IP.
pub fn addresses(service: &Service) -> Vec<GatewayStatusAddress> {
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
        && let Some(cluster_ip) = cluster_ip(service)
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

    fn dns1035_label(name: &str) -> bool {
        name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    }

    #[test]
    fn a_fleet_is_named_gateway_dash_class_and_always_a_service_name() {
        assert_eq!(name("edge", "envoy-operator"), "edge-envoy-operator");
        let long_class = format!("{}.example.com", "c".repeat(240));
        let awkward = [
            ("dotted.name", "envoy"),
            ("7eleven", "envoy"),
            (&*"g".repeat(63), "envoy-operator"),
            ("edge", long_class.as_str()),
            ("", ""),
            ("édge", "envoy"),
        ];
        for (gateway, class) in awkward {
            let name = name(gateway, class);
            assert!(dns1035_label(&name), "{gateway:?} of {class:?} names its fleet {name:?}");
        }
        assert_eq!(&name("dotted.name", "envoy")[..18], "dotted-name-envoy-", "spelled, then a hash");
        assert_eq!(name("7eleven", "envoy").len(), "gw-7eleven-envoy-".len() + 8);
        assert_ne!(name("a.b", "c"), name("a-b", "c"), "a spelling never makes two Gateways share a fleet");
        assert_ne!(name("a-b.c", "d"), name("a-b", "c.d"));
        let (one, other) = (name(&"g".repeat(63), "a"), name(&"g".repeat(63), "b"));
        assert_ne!(one, other, "shortened names keep apart");
        assert_eq!(one.len(), 63);
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
