use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{
    FieldError, FieldErrors, Rules, Warnings, check_format, check_name_fits_label, check_replicas, format,
    quantity,
};
use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};
use crate::api::{Envoy, ServicePort, ServiceType};
use crate::bootstrap::XdsTarget;
use crate::names;

/// Name of the static cluster for the xDS server when the spec does not name it.
pub const DEFAULT_XDS_CLUSTER_NAME: &str = "xds_cluster";
/// Suffix of the bootstrap ConfigMap's default name.
pub const CONFIG_MAP_SUFFIX: &str = "-bootstrap";

fn default_ports() -> Vec<ServicePort> {
    vec![ServicePort { name: "http".to_owned(), port: 8080, target_port: None }]
}

/// The requests and limits of every Envoy container unless told otherwise (see [`names`]).
pub fn default_resources() -> ResourceRequirements {
    let quantities = |pairs: &[(&str, &str)]| {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned()))).collect::<BTreeMap<_, _>>()
    };
    ResourceRequirements {
        requests: Some(quantities(&[
            ("cpu", names::DEFAULT_PROXY_CPU_REQUEST),
            ("memory", names::DEFAULT_PROXY_MEMORY_REQUEST),
        ])),
        limits: Some(quantities(&[("memory", names::DEFAULT_PROXY_MEMORY_LIMIT)])),
        ..Default::default()
    }
}

/// A defaulted Envoy's spec.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveEnvoy {
    /// The fleet's Deployment and Service; empty only for an object without a name yet.
    pub name: String,
    /// The bootstrap ConfigMap; empty only for an object without a name yet.
    pub config_map_name: String,
    pub replicas: i32,
    /// The xDS server of the bootstrap; `None` without `spec.xds` (or with a port out of range,
    /// which validation rejects).
    pub xds: Option<XdsTarget>,
    pub image: String,
    pub ports: Vec<ServicePort>,
    pub service_type: ServiceType,
    pub resources: ResourceRequirements,
    /// Whether the listeners write a JSON access log to standard output.
    pub access_log: bool,
}

impl Rules for Envoy {
    type Effective = EffectiveEnvoy;

    fn apply_defaults(&mut self) -> EffectiveEnvoy {
        let own_name = self.metadata.name.clone();
        let spec = &mut self.spec;
        if spec.name.is_none() {
            spec.name = own_name.clone();
        }
        if spec.config_map_name.is_none() {
            spec.config_map_name = own_name.map(|name| format!("{name}{CONFIG_MAP_SUFFIX}"));
        }
        let xds = spec.xds.as_mut().and_then(|xds| {
            let cluster_name = xds.name.get_or_insert_with(|| DEFAULT_XDS_CLUSTER_NAME.to_owned()).clone();
            let port = u16::try_from(xds.port).ok().filter(|port| *port != 0)?;
            Some(XdsTarget { cluster_name, host: xds.host.clone(), port })
        });
        if spec.ports.is_empty() {
            spec.ports = default_ports();
        }
        EffectiveEnvoy {
            name: spec.name.clone().unwrap_or_default(),
            config_map_name: spec.config_map_name.clone().unwrap_or_default(),
            replicas: *spec.replicas.get_or_insert(names::DEFAULT_REPLICAS),
            xds,
            image: spec.image.get_or_insert_with(|| names::DEFAULT_ENVOY_IMAGE.to_owned()).clone(),
            ports: spec.ports.clone(),
            service_type: *spec.service_type.get_or_insert_default(),
            resources: spec.resources.get_or_insert_with(default_resources).clone(),
            access_log: *spec.access_log.get_or_insert(true),
        }
    }

    fn validate(&self, old: Option<&Self>) -> Result<Warnings, FieldErrors> {
        let mut errors = FieldErrors::default();
        let mut warnings = Warnings::new();
        let spec = &self.spec;

        let own_name = self.metadata.name.as_deref();
        check_name_fits_label(&mut errors, own_name, "app.kubernetes.io/instance=<name> of the fleet's pods");
        if let Some(name) = &spec.name {
            let reasons = format::dns1123_label(name);
            if own_name == Some(name.as_str()) {
                // The fleet is named after the Envoy: the fix is a name, or `spec.name`.
                if !reasons.is_empty() && name.len() <= super::MAX_LABEL_VALUE {
                    errors.push(FieldError::invalid(
                        "metadata.name",
                        name.as_str(),
                        format!("{}: the Deployment and Service are named after the Envoy unless spec.name is set", reasons.join(", ")),
                    ));
                }
            } else {
                check_format(&mut errors, "spec.name", name, reasons);
            }
        }
        if let Some(name) = &spec.config_map_name {
            check_format(&mut errors, "spec.configMapName", name, format::dns1123_subdomain(name));
        }
        check_replicas(&mut errors, "spec.replicas", spec.replicas);
        if spec.replicas == Some(0) {
            warnings.push("spec.replicas: 0: the fleet is scaled to zero and serves nothing".to_owned());
        }

        // Without spec.xds the fleet is served by the operator's control plane: nothing to warn of.
        match &spec.xds {
            None => {}
            Some(xds) => {
                if let Some(name) = &xds.name {
                    check_format(&mut errors, "spec.xds.name", name, format::cluster_name(name));
                }
                if xds.host.is_empty() {
                    errors.push(FieldError::required(
                        "spec.xds.host",
                        "the xDS server's DNS name or IP address",
                    ));
                } else {
                    check_format(&mut errors, "spec.xds.host", &xds.host, format::host(&xds.host));
                }
                let reasons = format::port(xds.port);
                if !reasons.is_empty() {
                    errors.push(FieldError::invalid("spec.xds.port", xds.port, reasons.join(", ")));
                }
            }
        }

        if let Some(image) = &spec.image {
            check_format(&mut errors, "spec.image", image, format::image(image));
            if format::image_is_unpinned(image) {
                warnings.push(format!(
                    "spec.image: {image:?} is not pinned to a tag or digest: nodes may run different Envoy versions"
                ));
            }
        }

        validate_ports(&mut errors, &spec.ports);
        if let Some(ip) = &spec.service_cluster_ip
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            errors.push(FieldError::invalid(
                "spec.serviceClusterIP",
                ip.as_str(),
                "must be an IPv4 or IPv6 address",
            ));
        }
        if let Some(child_metadata) = &spec.child_metadata {
            errors.0.extend(child_metadata_errors(child_metadata, "spec.childMetadata").0);
        }
        if let Some(resources) = &spec.resources {
            validate_resources(&mut errors, resources);
        }

        if let Some(old) = old {
            validate_update(&mut errors, &mut warnings, self, old);
        }

        errors.into_result().map(|()| warnings)
    }
}

/// Labels, and annotations, a fleet's objects may be given (the CRD's `maxProperties`).
pub const MAX_CHILD_METADATA: usize = 16;

/// Label keys the operator sets on a fleet's objects and selects its pods by: a user's value
/// would move pods out of their Deployment, Service or watch.
const OPERATOR_LABEL_KEYS: [&str; 3] = [
    crate::children::labels::ENVOY_NAME_KEY,
    crate::children::labels::ENVOY_INSTANCE_KEY,
    names::MANAGED_BY_KEY,
];

/// Whether `key` is one the operator sets on a fleet's objects: of its own domain, or a label
/// it selects by.
pub fn operator_key(key: &str, label: bool) -> bool {
    let domain = key.split_once('/').map(|(prefix, _)| prefix);
    domain.is_some_and(|domain| {
        domain == names::OPERATOR_DOMAIN || domain.ends_with(&format!(".{}", names::OPERATOR_DOMAIN))
    }) || (label && OPERATOR_LABEL_KEYS.contains(&key))
}

/// What is wrong with labels and annotations meant for a fleet's objects, at `path`
/// (`<path>.labels`, `<path>.annotations`): more than [`MAX_CHILD_METADATA`], keys or label
/// values the API server would refuse, keys the operator sets itself.
pub fn child_metadata_errors(metadata: &crate::api::ChildMetadata, path: &str) -> FieldErrors {
    let mut errors = FieldErrors::default();
    for (field, map, label) in
        [("labels", &metadata.labels, true), ("annotations", &metadata.annotations, false)]
    {
        let path = format!("{path}.{field}");
        if map.len() > MAX_CHILD_METADATA {
            errors.push(FieldError::forbidden(
                path.as_str(),
                format!("must have at most {MAX_CHILD_METADATA} items"),
            ));
        }
        for (key, value) in map {
            let at = format!("{path}[{key}]");
            check_format(&mut errors, &at, key, format::qualified_name(key));
            if label {
                check_format(&mut errors, &at, value, format::label_value(value));
            }
            if operator_key(key, label) {
                errors.push(FieldError::forbidden(
                    at.as_str(),
                    format!("{key} is set by the operator on the fleet's objects"),
                ));
            }
        }
    }
    errors
}

/// Listener ports an Envoy may expose (the CRD's `maxItems`).
pub const MAX_PORTS: usize = 16;

fn validate_ports(errors: &mut FieldErrors, ports: &[ServicePort]) {
    if ports.len() > MAX_PORTS {
        errors.push(FieldError::forbidden("spec.ports", format!("must have at most {MAX_PORTS} items")));
    }
    let mut names = HashMap::new();
    let mut numbers = HashMap::new();
    // Items beyond the cap are not checked one by one: the list is refused anyway, and the
    // work (and the answer) must not grow with a list of a million ports.
    for (i, port) in ports.iter().enumerate().take(MAX_PORTS) {
        let path = format!("spec.ports[{i}]");
        check_format(errors, &format!("{path}.name"), &port.name, format::iana_svc_name(&port.name));
        if port.name == crate::proxy::READINESS_PORT_NAME {
            errors.push(FieldError::invalid(
                format!("{path}.name"),
                port.name.as_str(),
                "is reserved for the proxy's readiness port",
            ));
        }
        if names.insert(port.name.as_str(), i).is_some() {
            errors.push(FieldError::duplicate(format!("{path}.name"), port.name.as_str()));
        }
        for (field, value) in [("port", Some(port.port)), ("targetPort", port.target_port)] {
            let Some(value) = value else { continue };
            let reasons = format::port(value);
            if !reasons.is_empty() {
                errors.push(FieldError::invalid(format!("{path}.{field}"), value, reasons.join(", ")));
            }
        }
        if numbers.insert(port.port, i).is_some() {
            errors.push(FieldError::duplicate(format!("{path}.port"), port.port));
        }
        let listener = port.listener_port();
        if listener == ADMIN_PORT || listener == READINESS_PORT {
            let field = if port.target_port.is_some() { "targetPort" } else { "port" };
            errors.push(FieldError::invalid(
                format!("{path}.{field}"),
                listener,
                format!("listener ports {ADMIN_PORT} and {READINESS_PORT} are reserved for the admin interface and the readiness listener"),
            ));
        }
    }
}

fn validate_resources(errors: &mut FieldErrors, resources: &ResourceRequirements) {
    if resources.claims.as_ref().is_some_and(|claims| !claims.is_empty()) {
        errors.push(FieldError::forbidden(
            "spec.resources.claims",
            "claims are not supported: the fleet's pods declare no resourceClaims",
        ));
    }
    let empty = BTreeMap::new();
    let requests = resources.requests.as_ref().unwrap_or(&empty);
    let limits = resources.limits.as_ref().unwrap_or(&empty);
    for (field, map) in [("requests", requests), ("limits", limits)] {
        for (resource, value) in map {
            if let Err(reason) = quantity::check(value) {
                errors.push(FieldError::invalid(
                    format!("spec.resources.{field}[{resource}]"),
                    value.0.as_str(),
                    reason,
                ));
            }
        }
    }
    for (resource, request, _) in quantity::requests_over_limits(requests, limits) {
        errors.push(FieldError::invalid(
            format!("spec.resources.requests[{resource}]"),
            request.0.as_str(),
            format!("must be less than or equal to {resource} limit"),
        ));
    }
}

fn validate_update(errors: &mut FieldErrors, warnings: &mut Warnings, new: &Envoy, old: &Envoy) {
    let effective_name = |envoy: &Envoy| envoy.spec.name.clone().or_else(|| envoy.metadata.name.clone());
    if let (Some(before), Some(after)) = (effective_name(old), effective_name(new))
        && before != after
    {
        errors.push(FieldError::invalid(
            "spec.name",
            after,
            "field is immutable: it names the Deployment and the Service; create a new Envoy instead",
        ));
    }
    let (spec, old_spec) = (&new.spec, &old.spec);
    if old_spec.config_map_name.is_some() && spec.config_map_name != old_spec.config_map_name {
        // Sidecars are not rolled: they mount the CA from a ConfigMap named after the Envoy.
        warnings.push(format!(
            "spec.configMapName: changing from {:?} to {:?} moves the bootstrap to a new ConfigMap and rolls the fleet's pods; sidecars that name the Envoy are not rolled and keep the CA file they mount ({})",
            old_spec.config_map_name.as_deref().unwrap_or_default(),
            spec.config_map_name.as_deref().unwrap_or_default(),
            crate::children::envoy::ca_config_map_name(new.metadata.name.as_deref().unwrap_or_default())
        ));
    }
    if spec.xds != old_spec.xds {
        warnings
            .push("spec.xds: changing the xDS server rolls every proxy onto the new bootstrap".to_owned());
    }
    if old_spec.image.is_some() && spec.image != old_spec.image {
        warnings.push(format!(
            "spec.image: changing from {:?} to {:?} rolls every proxy of the fleet onto the new image",
            old_spec.image.as_deref().unwrap_or_default(),
            spec.image.as_deref().unwrap_or_default()
        ));
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::{EnvoySpec, XdsServer};
    use crate::names::DEFAULT_ENVOY_IMAGE;

    fn envoy(spec: EnvoySpec) -> Envoy {
        Envoy {
            metadata: ObjectMeta { name: Some("edge-envoy".into()), ..Default::default() },
            spec,
            status: None,
        }
    }

    fn seed() -> Envoy {
        envoy(EnvoySpec {
            name: Some("webserver-beta".into()),
            config_map_name: Some("envoy-cfg-1".into()),
            replicas: Some(3),
            xds: Some(XdsServer {
                name: Some("xds_cluster".into()),
                host: "xds-service.default".into(),
                port: 19000,
            }),
            ..Default::default()
        })
    }

    #[test]
    fn defaults_fill_everything_and_are_idempotent() {
        let mut object = envoy(EnvoySpec {
            xds: Some(XdsServer { name: None, host: "xds".into(), port: 18000 }),
            ..Default::default()
        });
        object.apply_defaults();
        let spec = &object.spec;
        assert_eq!(spec.name.as_deref(), Some("edge-envoy"));
        assert_eq!(spec.config_map_name.as_deref(), Some("edge-envoy-bootstrap"));
        assert_eq!(spec.replicas, Some(1));
        assert_eq!(spec.xds.as_ref().and_then(|x| x.name.as_deref()), Some(DEFAULT_XDS_CLUSTER_NAME));
        assert_eq!(spec.image.as_deref(), Some(DEFAULT_ENVOY_IMAGE));
        assert!(!format::image_is_unpinned(DEFAULT_ENVOY_IMAGE), "the default image must be pinned");
        assert_eq!(spec.ports, default_ports());
        assert_eq!(spec.service_type, Some(ServiceType::ClusterIP));
        assert_eq!(spec.resources, Some(default_resources()));
        assert_eq!(spec.access_log, Some(true));
        let once = object.clone();
        object.apply_defaults();
        assert_eq!(object, once);
        assert_eq!(object.validate(None), Ok(vec![]));
    }

    #[test]
    fn the_seed_keeps_its_values() {
        let mut object = seed();
        object.apply_defaults();
        assert_eq!(object.spec.name.as_deref(), Some("webserver-beta"));
        assert_eq!(object.spec.config_map_name.as_deref(), Some("envoy-cfg-1"));
        assert_eq!(object.spec.replicas, Some(3));
        assert_eq!(object.validate(None), Ok(vec![]));
    }

    #[test]
    fn a_service_cluster_ip_must_be_an_ip_address() {
        for good in ["10.96.0.200", "fd00::c8"] {
            let object = envoy(EnvoySpec { service_cluster_ip: Some(good.into()), ..Default::default() });
            assert_eq!(crate::rules::defaulted(object).validate(None), Ok(vec![]), "{good}");
        }
        for bad in ["None", "10.96.0.300", "edge.example.com", ""] {
            let object = envoy(EnvoySpec { service_cluster_ip: Some(bad.into()), ..Default::default() });
            let errors = crate::rules::defaulted(object).validate(None).unwrap_err();
            assert_eq!(errors.0.len(), 1, "{bad}: {errors}");
            assert_eq!(errors.0[0].path, "spec.serviceClusterIP", "{bad}");
        }
    }

    #[test]
    fn unpinned_images_warn_and_a_fleet_on_the_operators_control_plane_does_not() {
        let mut object =
            envoy(EnvoySpec { image: Some("envoyproxy/envoy:latest".into()), ..Default::default() });
        object.apply_defaults();
        let warnings = object.validate(None).unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("spec.image: \"envoyproxy/envoy:latest\" is not pinned"));
    }

    #[test]
    fn update_rules() {
        let mut old = seed();
        old.apply_defaults();

        let mut renamed = old.clone();
        renamed.spec.name = Some("webserver-gamma".into());
        let errors = renamed.validate(Some(&old)).unwrap_err();
        assert_eq!(errors.0.len(), 1);
        assert_eq!(errors.0[0].path, "spec.name");
        assert!(errors.0[0].detail.starts_with("field is immutable"));

        // Setting the name a stored object already had implicitly is no rename.
        let mut implicit = old.clone();
        implicit.spec.name = None;
        let mut explicit = implicit.clone();
        explicit.spec.name = Some("edge-envoy".into());
        assert!(explicit.validate(Some(&implicit)).is_ok());

        let mut moved = old.clone();
        moved.spec.config_map_name = Some("envoy-cfg-2".into());
        moved.spec.xds.as_mut().unwrap().port = 19001;
        let warnings = moved.validate(Some(&old)).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("spec.configMapName: changing from \"envoy-cfg-1\" to \"envoy-cfg-2\"")
        );
        // Only the fleet's pods roll: sidecars are not, and keep the CA file they mount.
        assert!(
            warnings[0].ends_with(
                "rolls the fleet's pods; sidecars that name the Envoy are not rolled and keep the CA file they mount (edge-envoy-xds-ca)"
            ),
            "{}",
            warnings[0]
        );
        assert!(warnings[1].starts_with("spec.xds: changing the xDS server rolls every proxy"));

        let mut upgraded = old.clone();
        upgraded.spec.image = Some("envoyproxy/envoy:v1.35.0".into());
        let warnings = upgraded.validate(Some(&old)).unwrap();
        assert_eq!(
            warnings,
            [format!(
                "spec.image: changing from {DEFAULT_ENVOY_IMAGE:?} to \"envoyproxy/envoy:v1.35.0\" rolls every proxy of the fleet onto the new image"
            )]
        );
        assert_eq!(old.validate(Some(&old)), Ok(vec![]), "an unchanged image is no roll");
    }

    #[test]
    fn names_are_reported_where_they_are_set() {
        let mut dotted = envoy(EnvoySpec::default());
        dotted.metadata.name = Some("edge.envoy".into());
        let errors = crate::rules::defaulted(dotted.clone()).validate(None).unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        assert_eq!(errors.0[0].path, "metadata.name", "not the defaulted spec.name");
        dotted.spec.name = Some("edge".into());
        assert!(crate::rules::defaulted(dotted).validate(None).is_ok(), "spec.name names the fleet");

        let mut long = envoy(EnvoySpec { name: Some("edge".into()), ..Default::default() });
        long.metadata.name = Some("e".repeat(64));
        let errors = crate::rules::defaulted(long).validate(None).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["metadata.name"], "{errors}");
    }

    #[test]
    fn child_metadata_may_not_take_the_operators_keys_nor_break_the_api_servers_rules() {
        let spec = |labels: &[(&str, &str)], annotations: &[(&str, &str)]| EnvoySpec {
            child_metadata: Some(crate::api::ChildMetadata {
                labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                annotations: annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            }),
            ..Default::default()
        };
        let fine = envoy(spec(
            &[("team", "edge"), ("example.com/tier", ""), ("gateway.networking.k8s.io/gateway-name", "gw")],
            &[("example.com/trace", "any text at all"), ("prometheus.io/scrape", "false")],
        ));
        assert!(fine.validate(None).is_ok(), "{:?}", fine.validate(None));
        let refused = [
            (
                "spec.childMetadata.labels[app.kubernetes.io/instance]",
                spec(&[("app.kubernetes.io/instance", "x")], &[]),
            ),
            (
                "spec.childMetadata.labels[x.envoy-operator.example.com/y]",
                spec(&[("x.envoy-operator.example.com/y", "x")], &[]),
            ),
            (
                "spec.childMetadata.annotations[envoy-operator.example.com/config-hash]",
                spec(&[], &[("envoy-operator.example.com/config-hash", "0")]),
            ),
            ("spec.childMetadata.labels[team]", spec(&[("team", "two words")], &[])),
            ("spec.childMetadata.labels[-team]", spec(&[("-team", "x")], &[])),
            ("spec.childMetadata.annotations[Example.com/x]", spec(&[], &[("Example.com/x", "x")])),
        ];
        for (path, spec) in refused {
            let errors = envoy(spec).validate(None).expect_err(path);
            assert!(errors.iter().any(|error| error.to_string().starts_with(path)), "{path}: {errors}");
        }
        let many: Vec<(String, String)> =
            (0..=MAX_CHILD_METADATA).map(|i| (format!("k{i}"), String::new())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let errors = envoy(spec(&many, &[])).validate(None).expect_err("too many labels");
        assert!(errors.to_string().contains("must have at most 16 items"), "{errors}");
    }

    #[test]
    fn resource_claims_are_refused() {
        let mut object = seed();
        object.spec.resources = Some(ResourceRequirements {
            claims: Some(vec![k8s_openapi::api::core::v1::ResourceClaim {
                name: "gpu".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let errors = object.validate(None).unwrap_err();
        assert_eq!(
            errors.to_string(),
            "spec.resources.claims: Forbidden: claims are not supported: the fleet's pods declare no resourceClaims"
        );
    }

    #[test]
    fn resource_requests_may_not_exceed_limits() {
        let mut object = seed();
        object.spec.resources = Some(ResourceRequirements {
            requests: Some([("cpu".to_owned(), Quantity("2".into()))].into()),
            limits: Some([("cpu".to_owned(), Quantity("1500m".into()))].into()),
            ..Default::default()
        });
        let errors = object.validate(None).unwrap_err();
        assert_eq!(
            errors.to_string(),
            "spec.resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit"
        );
    }
}
