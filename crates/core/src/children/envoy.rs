//! Desired state of an Envoy's children (pure): the bootstrap ConfigMap, the fleet's
//! Deployment and the Service in front of it.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, KeyToPath,
    PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, SecretVolumeSource, Service,
    ServicePort as CoreServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{Resource, ResourceExt};

use super::labels;
use crate::api::Envoy;
use crate::bootstrap::{ControlPlane, Xds, bootstrap, ca_sds_file};
use crate::identity;
use crate::proxy::{self, PROXY_UID};
use crate::rules::Defaulted;

/// Key of the bootstrap in the ConfigMap, and so its file name in the pods.
pub const BOOTSTRAP_KEY: &str = "envoy.yaml";
/// Key of the SDS file with the control plane's CA in the ConfigMap (fleets of the operator's
/// control plane only). Not part of the config hash: a rotated CA reaches running proxies
/// through the mounted file, without rolling them.
pub const CA_SDS_KEY: &str = "xds-ca.yaml";
/// Where the ConfigMap is mounted: a whole directory, so updates reach running pods.
pub const CONFIG_DIR: &str = "/etc/envoy";
/// Suffix of the name of the ConfigMap that holds only the control plane's CA file.
pub const CA_CONFIG_MAP_SUFFIX: &str = "-xds-ca";

/// The ConfigMap with only the control plane's CA file ([`CA_SDS_KEY`]) that sidecars naming
/// the Envoy `envoy_name` mount: named after the Envoy, not `spec.configMapName`, so a change of
/// that never takes the file from under running sidecars (which are not rolled).
pub fn ca_config_map_name(envoy_name: &str) -> String {
    format!("{envoy_name}{CA_CONFIG_MAP_SUFFIX}")
}

/// Name of the fleet pods' volume of the identity Secret.
pub const IDENTITY_VOLUME: &str = "xds-identity";
/// Mode of the identity files in a fleet pod: the pod's group (the proxy's) may read them.
const IDENTITY_FILE_MODE: i32 = 0o440;

/// The volume of the identity Secret of the Envoy `envoy_name` (only its SDS file), with files
/// of `mode`. The Secret is required: a pod that would start without its identity waits for it.
pub fn identity_volume(volume_name: &str, envoy_name: &str, mode: i32) -> Volume {
    Volume {
        name: volume_name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(identity::secret_name(envoy_name)),
            items: Some(vec![KeyToPath {
                key: identity::SDS_KEY.to_owned(),
                path: identity::SDS_KEY.to_owned(),
                mode: None,
            }]),
            default_mode: Some(mode),
            optional: Some(false),
        }),
        ..Default::default()
    }
}

/// The operator's control plane as a fleet's bootstrap needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlaneTrust {
    pub control_plane: ControlPlane,
    /// The CA bundle (PEM) the control plane's certificate chains to; `None` where it is not
    /// known (`render` without `--xds-ca-file`): the ConfigMap then lacks the CA file, which
    /// the operator adds.
    pub ca_pem: Option<String>,
}

/// The fleet key the control plane serves an Envoy under: `<namespace>/<name>`.
pub fn fleet_key(envoy: &Envoy) -> String {
    format!("{}/{}", envoy.namespace().unwrap_or_default(), envoy.name_any())
}

/// Prometheus' conventional scrape annotations, pointing at the statistics the readiness
/// listener exposes.
pub fn scrape_annotations() -> BTreeMap<String, String> {
    [
        ("prometheus.io/scrape", "true".to_owned()),
        ("prometheus.io/port", crate::api::envoy::READINESS_PORT.to_string()),
        ("prometheus.io/path", "/stats/prometheus".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The children of an Envoy and the hash of the bootstrap they carry.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvoyChildren {
    pub config_map: ConfigMap,
    /// The CA file alone, for sidecars ([`ca_config_map_name`]): only for an Envoy the
    /// operator's control plane serves, and not where `spec.configMapName` is that very name
    /// (the bootstrap ConfigMap then carries the file for both).
    pub ca_config_map: Option<ConfigMap>,
    pub deployment: Deployment,
    pub service: Service,
    pub config_hash: String,
    /// The identity Secret the fleet's pods mount ([`identity::secret_name`]): for a fleet of
    /// the operator's control plane only; the reconciler issues it before the Deployment.
    pub identity_secret: Option<String>,
}

/// The children a (valid) Envoy asks for. Its proxies take their configuration from its
/// `spec.xds`; without one, from the operator's control plane (`control_plane`), or from
/// nowhere (admin only) when the operator runs none.
pub fn desired_children(
    envoy: &Defaulted<Envoy>,
    control_plane: Option<&ControlPlaneTrust>,
) -> EnvoyChildren {
    let instance = envoy.name_any();
    let spec = envoy.effective();
    let fleet = spec.name.clone();
    let config_map_name = spec.config_map_name.clone();
    let fleet_key = fleet_key(envoy);
    let ca_sds_path = format!("{CONFIG_DIR}/{CA_SDS_KEY}");
    let identity_sds_path = identity::sds_path();
    let xds = match (&spec.xds, control_plane) {
        (Some(external), _) => Xds::External(external),
        (None, Some(trust)) => Xds::Operator {
            control_plane: &trust.control_plane,
            fleet: &fleet_key,
            ca_sds_path: &ca_sds_path,
            identity_sds_path: &identity_sds_path,
        },
        (None, None) => Xds::None,
    };
    let bootstrap = bootstrap(xds);
    let config_hash = bootstrap.hash();
    let mut data = BTreeMap::from([(BOOTSTRAP_KEY.to_owned(), bootstrap.to_yaml())]);
    if let (Xds::Operator { .. }, Some(trust)) = (xds, control_plane)
        && let Some(ca_pem) = &trust.ca_pem
    {
        data.insert(CA_SDS_KEY.to_owned(), ca_sds_file(ca_pem, &trust.control_plane.host));
    }
    // `spec.childMetadata` (a Gateway's `spec.infrastructure`) goes on every child and the pods,
    // under the operator's own labels and annotations: validation refuses the keys it sets, and
    // where one slips through (an Envoy the webhook never saw), the operator's value wins, so
    // the selectors and watches keep finding what they made.
    let child_metadata = envoy.spec.child_metadata.clone().unwrap_or_default();
    let with_labels = |own: BTreeMap<String, String>| {
        let mut labels = child_metadata.labels.clone();
        labels.extend(own);
        labels
    };
    let with_annotations = |own: BTreeMap<String, String>| {
        let mut annotations = child_metadata.annotations.clone();
        annotations.extend(own);
        annotations
    };
    let child_annotations =
        (!child_metadata.annotations.is_empty()).then(|| with_annotations(BTreeMap::new()));
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: envoy.namespace(),
        labels: Some(with_labels(labels::envoy_labels(&instance))),
        annotations: child_annotations.clone(),
        owner_references: envoy.controller_owner_ref(&()).map(|owner: OwnerReference| vec![owner]),
        ..Default::default()
    };
    let ca_name = ca_config_map_name(&instance);
    let ca_config_map =
        (matches!(xds, Xds::Operator { .. }) && ca_name != config_map_name).then(|| ConfigMap {
            metadata: meta(&ca_name),
            data: data.get(CA_SDS_KEY).map(|file| BTreeMap::from([(CA_SDS_KEY.to_owned(), file.clone())])),
            ..Default::default()
        });
    let config_map = ConfigMap { metadata: meta(&config_map_name), data: Some(data), ..Default::default() };
    let deployment = Deployment {
        metadata: meta(&fleet),
        spec: Some(DeploymentSpec {
            replicas: Some(spec.replicas),
            selector: LabelSelector {
                match_labels: Some(labels::envoy_selector(&instance)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(with_labels(labels::envoy_labels(&instance))),
                    annotations: Some({
                        let mut annotations = scrape_annotations();
                        annotations.insert(labels::CONFIG_HASH_ANNOTATION.to_owned(), config_hash.clone());
                        with_annotations(annotations)
                    }),
                    ..Default::default()
                }),
                spec: Some(pod_spec(envoy, &fleet, &config_map_name, matches!(xds, Xds::Operator { .. }))),
            },
            ..Default::default()
        }),
        status: None,
    };
    let service = Service {
        metadata: meta(&fleet),
        spec: Some(ServiceSpec {
            type_: Some(spec.service_type.as_str().to_owned()),
            cluster_ip: envoy.spec.service_cluster_ip.clone(),
            selector: Some(labels::envoy_selector(&instance)),
            ports: Some(
                spec.ports
                    .iter()
                    .map(|port| CoreServicePort {
                        name: Some(port.name.clone()),
                        port: port.port,
                        target_port: Some(IntOrString::Int(port.listener_port())),
                        protocol: Some("TCP".to_owned()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    };
    let identity_secret = matches!(xds, Xds::Operator { .. }).then(|| identity::secret_name(&instance));
    EnvoyChildren { config_map, ca_config_map, deployment, service, config_hash, identity_secret }
}

/// The fleet's pod. A proxy of the operator's control plane (`with_identity`) also mounts the
/// fleet's identity Secret (its client certificate), readable by the proxy's group only.
fn pod_spec(envoy: &Defaulted<Envoy>, fleet: &str, config_map_name: &str, with_identity: bool) -> PodSpec {
    let spec = envoy.effective();
    let mut ports: Vec<ContainerPort> = spec
        .ports
        .iter()
        .map(|port| ContainerPort {
            name: Some(port.name.clone()),
            container_port: port.listener_port(),
            protocol: Some("TCP".to_owned()),
            ..Default::default()
        })
        .collect();
    ports.push(proxy::readiness_port());
    let container = Container {
        name: "envoy".to_owned(),
        image: Some(spec.image.clone()),
        args: Some(
            [
                "-c",
                &format!("{CONFIG_DIR}/{BOOTSTRAP_KEY}"),
                "--service-node",
                "$(POD_NAME)",
                "--service-cluster",
                fleet,
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        env: Some(proxy::downward_env()),
        ports: Some(ports),
        readiness_probe: Some(proxy::readiness_probe()),
        lifecycle: Some(proxy::drain_on_stop(proxy::FLEET_DRAIN_SECONDS)),
        resources: Some(spec.resources.clone()),
        security_context: Some(proxy::security_context()),
        volume_mounts: Some(
            [
                Some(VolumeMount {
                    name: "bootstrap".to_owned(),
                    mount_path: CONFIG_DIR.to_owned(),
                    read_only: Some(true),
                    ..Default::default()
                }),
                with_identity.then(|| VolumeMount {
                    name: IDENTITY_VOLUME.to_owned(),
                    mount_path: identity::MOUNT_DIR.to_owned(),
                    read_only: Some(true),
                    ..Default::default()
                }),
                // Envoy's only scratch space: the root filesystem is read-only.
                Some(VolumeMount {
                    name: "tmp".to_owned(),
                    mount_path: "/tmp".to_owned(),
                    ..Default::default()
                }),
            ]
            .into_iter()
            .flatten()
            .collect(),
        ),
        ..Default::default()
    };
    PodSpec {
        containers: vec![container],
        // The drain, then time for Envoy to exit before the kubelet kills it.
        termination_grace_period_seconds: Some(i64::from(proxy::FLEET_DRAIN_SECONDS) + 20),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(PROXY_UID),
            run_as_group: Some(PROXY_UID),
            // The identity Secret's files belong to this group, so mode 0440 lets Envoy read its
            // private key and nobody else.
            fs_group: with_identity.then_some(PROXY_UID),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        volumes: Some(
            [
                Some(Volume {
                    name: "bootstrap".to_owned(),
                    config_map: Some(ConfigMapVolumeSource {
                        name: config_map_name.to_owned(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                with_identity
                    .then(|| identity_volume(IDENTITY_VOLUME, &envoy.name_any(), IDENTITY_FILE_MODE)),
                Some(Volume {
                    name: "tmp".to_owned(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Default::default()
                }),
            ]
            .into_iter()
            .flatten()
            .collect(),
        ),
        ..Default::default()
    }
}

/// The bootstrap hash a fleet Deployment's pod template carries (what its pods run).
pub fn config_hash_of(deployment: &Deployment) -> Option<String> {
    let template = deployment.spec.as_ref()?.template.metadata.as_ref()?;
    template.annotations.as_ref()?.get(labels::CONFIG_HASH_ANNOTATION).cloned()
}

/// The `status.selector` of an Envoy: its pods' selector, for the scale subresource.
pub fn selector(envoy: &Envoy) -> String {
    labels::selector_string(&labels::envoy_selector(&envoy.name_any()))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::envoy::READINESS_PORT;
    use crate::api::{EnvoySpec, XdsServer};
    use crate::names::DEFAULT_ENVOY_IMAGE;
    use crate::rules::defaulted;

    fn envoy(name: &str) -> Defaulted<Envoy> {
        defaulted(raw_envoy(name))
    }

    fn raw_envoy(name: &str) -> Envoy {
        let mut envoy = Envoy::new(
            name,
            EnvoySpec {
                name: Some("webserver-beta".into()),
                config_map_name: Some("envoy-cfg-1".into()),
                replicas: Some(3),
                xds: Some(XdsServer {
                    name: Some("xds_cluster".into()),
                    host: "xds-service.default".into(),
                    port: 19000,
                }),
                ..Default::default()
            },
        );
        envoy.metadata.namespace = Some("ns".into());
        envoy.metadata.uid = Some("uid-e".into());
        envoy
    }

    fn json(value: &impl serde::Serialize) -> Value {
        serde_json::to_value(value).unwrap()
    }

    /// `spec.childMetadata` reaches every child and the pods (what a Gateway's
    /// `spec.infrastructure` becomes), and never displaces a label the operator selects by.
    #[test]
    fn child_metadata_goes_on_every_child_and_the_pods_under_the_operators_own_keys() {
        let mut raw = raw_envoy("edge-envoy");
        raw.spec.xds = None;
        raw.spec.child_metadata = Some(crate::api::ChildMetadata {
            labels: BTreeMap::from([
                ("team".to_owned(), "edge".to_owned()),
                (labels::ENVOY_INSTANCE_KEY.to_owned(), "hijack".to_owned()),
            ]),
            annotations: BTreeMap::from([
                ("example.com/trace".to_owned(), "on".to_owned()),
                ("prometheus.io/scrape".to_owned(), "false".to_owned()),
            ]),
        });
        let trust = ControlPlaneTrust {
            control_plane: ControlPlane { host: "xds.example".into(), port: 18000 },
            ca_pem: None,
        };
        let children = desired_children(&defaulted(raw), Some(&trust));
        let ca_config_map = children.ca_config_map.as_ref().expect("a fleet of the operator's control plane");
        let template = children.deployment.spec.as_ref().unwrap().template.metadata.clone().unwrap();
        let metas = [
            ("ConfigMap", &children.config_map.metadata),
            ("CA ConfigMap", &ca_config_map.metadata),
            ("Deployment", &children.deployment.metadata),
            ("Service", &children.service.metadata),
            ("pod template", &template),
        ];
        for (what, meta) in metas {
            let labels = meta.labels.clone().unwrap_or_default();
            let annotations = meta.annotations.clone().unwrap_or_default();
            assert_eq!(labels.get("team").map(String::as_str), Some("edge"), "{what}: {labels:?}");
            assert_eq!(
                labels.get(labels::ENVOY_INSTANCE_KEY).map(String::as_str),
                Some("edge-envoy"),
                "{what}: the operator's selector label wins"
            );
            assert_eq!(annotations.get("example.com/trace").map(String::as_str), Some("on"), "{what}");
        }
        let pod_annotations = template.annotations.unwrap();
        assert_eq!(pod_annotations["prometheus.io/scrape"], "true", "the operator's annotation wins");
        assert!(pod_annotations.contains_key(labels::CONFIG_HASH_ANNOTATION));
        let selector = children.service.spec.unwrap().selector.unwrap();
        assert_eq!(selector, labels::envoy_selector("edge-envoy"), "the selector is the operator's alone");
    }

    #[test]
    fn without_child_metadata_the_children_carry_only_the_operators_labels() {
        let children = desired_children(&envoy("edge-envoy"), None);
        assert_eq!(children.service.metadata.labels, Some(labels::envoy_labels("edge-envoy")));
        assert_eq!(children.service.metadata.annotations, None);
    }

    #[test]
    fn config_map_holds_the_bootstrap() {
        let children = desired_children(&envoy("edge-envoy"), None);
        let cm = json(&children.config_map);
        assert_eq!(cm["metadata"]["name"], "envoy-cfg-1");
        assert_eq!(cm["metadata"]["ownerReferences"][0]["kind"], "Envoy");
        let text = cm["data"][BOOTSTRAP_KEY].as_str().unwrap();
        let parsed: Value = serde_saphyr::from_str(text).unwrap();
        assert_eq!(parsed["admin"]["address"]["socket_address"]["address"], "127.0.0.1");
        assert_eq!(parsed["dynamic_resources"]["ads_config"]["api_type"], "GRPC");
        let xds = parsed["static_resources"]["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "xds_cluster")
            .unwrap();
        assert_eq!(xds["type"], "STRICT_DNS");
        assert_eq!(children.config_hash.len(), 16);
    }

    #[test]
    fn deployment_mounts_the_whole_config_directory_and_carries_the_hash() {
        let children = desired_children(&envoy("edge-envoy"), None);
        assert_eq!(config_hash_of(&children.deployment), Some(children.config_hash.clone()));
        let d = json(&children.deployment);
        assert_eq!(d["metadata"]["name"], "webserver-beta");
        assert_eq!(d["spec"]["replicas"], 3);
        let template = &d["spec"]["template"];
        assert_eq!(
            template["metadata"]["annotations"][labels::CONFIG_HASH_ANNOTATION],
            children.config_hash.as_str()
        );
        let pod = &template["spec"];
        let container = &pod["containers"][0];
        assert_eq!(container["name"], "envoy");
        assert_eq!(container["image"], DEFAULT_ENVOY_IMAGE);
        assert_eq!(
            container["args"],
            json!([
                "-c",
                "/etc/envoy/envoy.yaml",
                "--service-node",
                "$(POD_NAME)",
                "--service-cluster",
                "webserver-beta"
            ])
        );
        assert_eq!(container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
        assert_eq!(container["env"][1]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.namespace");
        let mount = &container["volumeMounts"][0];
        assert_eq!(mount["mountPath"], "/etc/envoy");
        assert!(mount.get("subPath").is_none(), "a subPath mount never sees ConfigMap updates");
        assert_eq!(pod["volumes"][0]["configMap"]["name"], "envoy-cfg-1");
        assert_eq!(container["readinessProbe"]["httpGet"], json!({"path": "/ready", "port": READINESS_PORT}));
        // Drained before it is stopped, within the pod's grace period.
        assert_eq!(container["lifecycle"]["preStop"]["exec"]["command"], json!(proxy::drain_command(10)));
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert_eq!(
            container["ports"],
            json!([
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"name": "envoy-ready", "containerPort": 9902, "protocol": "TCP"}
            ])
        );
        assert_eq!(container["resources"]["limits"]["memory"], "256Mi");
        let security = &container["securityContext"];
        assert_eq!(security["allowPrivilegeEscalation"], false);
        assert_eq!(security["readOnlyRootFilesystem"], true);
        assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
    }

    #[test]
    fn service_selects_only_this_envoys_pods() {
        let (a, b) = (desired_children(&envoy("a"), None), desired_children(&envoy("b"), None));
        let selector = |c: &EnvoyChildren| c.service.spec.as_ref().unwrap().selector.clone().unwrap();
        assert_ne!(selector(&a), selector(&b));
        let pod_labels =
            a.deployment.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
        assert!(selector(&a).iter().all(|(k, v)| pod_labels.get(k) == Some(v)));
        assert!(!selector(&a).iter().all(|(k, v)| {
            b.deployment
                .spec
                .as_ref()
                .unwrap()
                .template
                .metadata
                .as_ref()
                .unwrap()
                .labels
                .as_ref()
                .unwrap()
                .get(k)
                == Some(v)
        }));
        let service = json(&a.service);
        assert_eq!(service["spec"]["type"], "ClusterIP");
        assert_eq!(
            service["spec"]["ports"],
            json!([{"name": "http", "port": 8080, "targetPort": 8080, "protocol": "TCP"}])
        );
    }

    #[test]
    fn only_a_bootstrap_change_changes_the_pod_template() {
        let base = envoy("edge");
        let mut scaled = raw_envoy("edge");
        scaled.spec.replicas = Some(5);
        let scaled = defaulted(scaled);
        let template = |e: &Defaulted<Envoy>| desired_children(e, None).deployment.spec.unwrap().template;
        assert_eq!(template(&base), template(&scaled));
        let mut moved = raw_envoy("edge");
        moved.spec.xds.as_mut().unwrap().port = 19001;
        let moved = defaulted(moved);
        assert_ne!(desired_children(&base, None).config_hash, desired_children(&moved, None).config_hash);
        assert_ne!(template(&base), template(&moved));
    }

    /// Sidecars mount the CA file from a ConfigMap named after the Envoy: renaming the
    /// bootstrap ConfigMap (which deletes the old one) leaves theirs in place.
    #[test]
    fn the_ca_file_sidecars_mount_survives_a_config_map_rename() {
        let trust = ControlPlaneTrust {
            control_plane: ControlPlane { host: "xds.ops.svc".into(), port: 18000 },
            ca_pem: Some("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into()),
        };
        let served = |config_map_name: &str| {
            let mut envoy = raw_envoy("edge-envoy");
            envoy.spec.xds = None;
            envoy.spec.config_map_name = Some(config_map_name.into());
            desired_children(&defaulted(envoy), Some(&trust))
        };
        let before = served("envoy-cfg-1");
        let ca = before.ca_config_map.clone().expect("a CA ConfigMap for sidecars");
        assert_eq!(ca.metadata.name.as_deref(), Some("edge-envoy-xds-ca"));
        assert_eq!(ca.metadata.owner_references, before.config_map.metadata.owner_references);
        let data = ca.data.clone().unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), [CA_SDS_KEY], "the CA file only");
        assert_eq!(data.get(CA_SDS_KEY), before.config_map.data.as_ref().unwrap().get(CA_SDS_KEY));
        assert_eq!(served("envoy-cfg-2").ca_config_map, Some(ca), "unchanged by a rename");
        // The bootstrap ConfigMap of that very name carries the file for both.
        let same = served("edge-envoy-xds-ca");
        assert_eq!(same.ca_config_map, None);
        assert!(same.config_map.data.unwrap().contains_key(CA_SDS_KEY));
        // Proxies of an xDS server of the user's own trust nothing of the operator's.
        assert_eq!(desired_children(&envoy("edge-envoy"), Some(&trust)).ca_config_map, None);
    }

    /// A fleet of the operator's control plane mounts its identity Secret where the bootstrap
    /// reads the client certificate, readable by the proxy's group only; a fleet of the user's
    /// own xDS server has no identity of the operator's.
    #[test]
    fn a_fleet_of_the_operators_control_plane_mounts_its_identity() {
        let trust = ControlPlaneTrust {
            control_plane: ControlPlane { host: "xds.ops.svc".into(), port: 18000 },
            ca_pem: None,
        };
        let mut served = raw_envoy("edge");
        served.spec.xds = None;
        let children_of_served = desired_children(&defaulted(served), Some(&trust));
        let pod = json(&children_of_served.deployment)["spec"]["template"]["spec"].clone();
        let volume =
            pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == IDENTITY_VOLUME).unwrap().clone();
        assert_eq!(volume["secret"]["secretName"], "edge-xds-identity");
        assert_eq!(volume["secret"]["defaultMode"], 0o440);
        assert_eq!(pod["securityContext"]["fsGroup"], PROXY_UID);
        assert_eq!(children_of_served.identity_secret.as_deref(), Some("edge-xds-identity"));
        let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
        assert!(mounts.iter().any(|m| m["name"] == IDENTITY_VOLUME && m["mountPath"] == identity::MOUNT_DIR));

        let own_children = desired_children(&envoy("edge"), Some(&trust));
        assert_eq!(own_children.identity_secret, None);
        let own = json(&own_children.deployment)["spec"]["template"]["spec"].clone();
        assert!(own["volumes"].as_array().unwrap().iter().all(|v| v["name"] != IDENTITY_VOLUME));
        assert!(own["securityContext"].get("fsGroup").is_none());
    }
}
