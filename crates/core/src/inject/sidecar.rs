//! The sidecar itself: the `envoy` container and its scratch volume (and, for a proxy of the
//! operator's control plane, the volumes of the control plane's CA and of its identity; for a
//! mesh sidecar that captures, the init container installing the capture), built from typed
//! k8s-openapi pieces (so every field name is right) and handed to the patch as JSON.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, KeyToPath, ResourceRequirements,
    SeccompProfile, SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::InjectError;
use super::annotations::{
    Overrides, PROXY_CPU_ANNOTATION, PROXY_CPU_LIMIT_ANNOTATION, PROXY_MEMORY_ANNOTATION,
    PROXY_MEMORY_LIMIT_ANNOTATION,
};
use super::config::ProxyResources;
use super::status::{InjectionStatus, STATUS_VERSION};
use crate::bootstrap::{ControlPlane, Xds, XdsTarget, bootstrap};
use crate::capture::{self, Cidr};
use crate::children::envoy::{CA_SDS_KEY, CONFIG_DIR, identity_volume};
use crate::identity;
use crate::names::{FLEET_LABEL, MESH_SIDECAR_LABEL};
use crate::proxy;
use crate::rules::quantity;

/// Name of the sidecar container. Never renamed: users and tools address it by this name
/// (`kubectl logs -c envoy`); a foreign container of this name is a denial.
pub const CONTAINER_NAME: &str = "envoy";
/// Preferred name of the sidecar's `/tmp` volume; `envoy-tmp-2`, `-3`… when taken.
pub const TMP_VOLUME: &str = "envoy-tmp";
/// Size cap of the `/tmp` volume.
const TMP_SIZE_LIMIT: &str = "16Mi";
/// Preferred name of the volume of the control plane's CA; `envoy-xds-ca-2`… when taken.
pub const CA_VOLUME: &str = "envoy-xds-ca";
/// Preferred name of the volume of the fleet's identity; `envoy-xds-identity-2`… when taken.
pub const IDENTITY_VOLUME: &str = "envoy-xds-identity";
/// Name of the mesh sidecar's capture init container; never renamed (a foreign container of
/// this name is a denial).
pub const CAPTURE_CONTAINER_NAME: &str = "envoy-mesh-init";
/// Mode of the identity file in an application's pod: the sidecar's user is not the pod's
/// group (which the application decides), so the file is readable in the pod, whose containers
/// share one trust already (network, and here the fleet's namespace).
const IDENTITY_FILE_MODE: i32 = 0o444;

/// Everything the sidecar depends on, resolved from configuration and pod annotations.
#[derive(Clone, Debug, PartialEq)]
pub struct SidecarSpec {
    pub image: String,
    pub resources: ProxyResources,
    pub xds: SidecarXds,
    pub native: bool,
    pub tmp_volume: String,
}

/// Where the sidecar takes its configuration from.
#[derive(Clone, Debug, PartialEq)]
pub enum SidecarXds {
    /// Nowhere: the admin interface only.
    None,
    /// A user's xDS server.
    External(XdsTarget),
    /// The operator's control plane, as a proxy of an Envoy fleet.
    Fleet(FleetSidecar),
    /// The operator's control plane, as a mesh sidecar of the pod's namespace.
    Mesh(MeshSidecar),
}

/// A mesh sidecar: served by the operator's control plane its namespace's mesh configuration
/// ([`crate::identity::mesh_fleet_key`]), proving the pod's ServiceAccount with the client
/// certificate of that ServiceAccount's mesh identity Secret, trusting the CA of the
/// namespace's mesh CA ConfigMap; with outbound capture unless the pod opted out.
#[derive(Clone, Debug, PartialEq)]
pub struct MeshSidecar {
    pub control_plane: ControlPlane,
    pub namespace: String,
    pub service_account: String,
    /// The pod volume of the CA file ([`crate::identity::MESH_CA_CONFIG_MAP`]).
    pub ca_volume: String,
    /// The pod volume of the identity Secret ([`crate::identity::mesh_secret_name`]).
    pub identity_volume: String,
    /// The capture init container's settings; `None`: the pod opted out of capture.
    pub capture: Option<CaptureSpec>,
}

/// What the capture init container is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSpec {
    /// The image with `envoy-operator mesh-init` (the operator's own).
    pub image: String,
    pub exclude_ports: Vec<u16>,
    pub exclude_cidrs: Vec<Cidr>,
}

impl SidecarXds {
    /// The label the pod is given, key and value, for the control plane to serve it: a fleet
    /// sidecar's fleet label, a mesh sidecar's mesh label.
    pub fn pod_label(&self) -> Option<(&'static str, &str)> {
        match self {
            Self::Fleet(fleet) => Some((FLEET_LABEL, fleet.envoy.as_str())),
            Self::Mesh(_) => Some((MESH_SIDECAR_LABEL, "true")),
            Self::None | Self::External(_) => None,
        }
    }
}

impl From<Option<XdsTarget>> for SidecarXds {
    fn from(target: Option<XdsTarget>) -> Self {
        target.map_or(Self::None, Self::External)
    }
}

/// A sidecar served by the operator's control plane the configuration of the Envoy `envoy` of
/// the pod's namespace. The sidecar trusts the CA that Envoy's CA ConfigMap carries, and proves
/// it is a proxy of that fleet with the client certificate of the fleet's identity Secret.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetSidecar {
    pub control_plane: ControlPlane,
    /// The fleet the node metadata names: `<namespace>/<envoy>`.
    pub fleet: String,
    pub envoy: String,
    /// The ConfigMap of the control plane's CA file ([`CA_SDS_KEY`]) the sidecar mounts: the
    /// one named after the Envoy ([`crate::children::envoy::ca_config_map_name`]), which a
    /// change of the Envoy's `spec.configMapName` leaves in place.
    pub config_map: String,
    /// The pod volume of that file.
    pub ca_volume: String,
    /// The pod volume of the fleet's identity Secret ([`crate::identity::secret_name`]).
    pub identity_volume: String,
}

/// The container and volumes to add, and the hash that identifies this exact template.
#[derive(Clone, Debug, PartialEq)]
pub struct Sidecar {
    pub container: Value,
    /// The init container that runs first of all (a mesh sidecar's capture), if any.
    pub init: Option<Value>,
    /// The `/tmp` volume, then the CA's for a proxy of the operator's control plane.
    pub volumes: Vec<Value>,
    pub hash: String,
}

/// The container and volumes as compact JSON text, to be written into patches as they are.
#[derive(Clone, Debug, PartialEq)]
pub struct SidecarJson {
    pub container: String,
    pub init: Option<String>,
    pub volumes: Vec<String>,
}

impl Sidecar {
    /// The container and volumes as JSON text (what [`template_hash`] hashes).
    pub fn to_json(&self) -> SidecarJson {
        // Plain data of strings and numbers: serialization cannot fail.
        SidecarJson {
            container: self.container.to_string(),
            init: self.init.as_ref().map(Value::to_string),
            volumes: self.volumes.iter().map(Value::to_string).collect(),
        }
    }
}

/// A sidecar built once and kept with everything a patch takes from it, for every pod it fits:
/// its JSON text and the status annotation recording it, which depends on the sidecar alone
/// and on whether the pod is also given the fleet label.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedSidecar {
    pub spec: SidecarSpec,
    pub sidecar: Sidecar,
    pub json: SidecarJson,
    /// The records for a pod that keeps its labels as they are: without, then with the scrape
    /// annotations added.
    status: [PreparedStatus; 2],
    /// The records for a pod its label is added to (likewise): a fleet or mesh sidecar's only.
    status_with_label: Option<[PreparedStatus; 2]>,
    /// The label's value (the Envoy's name, or the mesh label's) as a JSON string literal: a
    /// fleet or mesh sidecar's only.
    label_literal: Option<String>,
}

/// A status annotation, as the record, its value and that value as a JSON string literal.
#[derive(Clone, Debug, PartialEq)]
pub struct PreparedStatus {
    pub record: InjectionStatus,
    /// The annotation's value: `record` as JSON.
    pub annotation: String,
    /// `annotation` quoted and escaped, to write into patches as it is.
    pub literal: String,
}

impl PreparedStatus {
    fn new(record: InjectionStatus) -> Self {
        let annotation = record.to_annotation();
        let literal = json_string(&annotation);
        Self { record, annotation, literal }
    }
}

impl PreparedSidecar {
    pub fn new(spec: SidecarSpec) -> Self {
        let sidecar = build(&spec);
        let json = sidecar.to_json();
        let name = vec![CONTAINER_NAME.to_owned()];
        let (containers, mut init_containers) =
            if spec.native { (Vec::new(), name) } else { (name, Vec::new()) };
        if sidecar.init.is_some() {
            init_containers.insert(0, CAPTURE_CONTAINER_NAME.to_owned());
        }
        let mut volumes = vec![spec.tmp_volume.clone()];
        volumes.extend(match &spec.xds {
            SidecarXds::Fleet(fleet) => vec![fleet.ca_volume.clone(), fleet.identity_volume.clone()],
            SidecarXds::Mesh(mesh) => vec![mesh.ca_volume.clone(), mesh.identity_volume.clone()],
            SidecarXds::None | SidecarXds::External(_) => Vec::new(),
        });
        let record = InjectionStatus {
            version: STATUS_VERSION,
            hash: sidecar.hash.clone(),
            containers,
            init_containers,
            volumes,
            labels: Vec::new(),
            annotations: Vec::new(),
        };
        let scrape_keys: Vec<String> = crate::children::envoy::scrape_annotations().into_keys().collect();
        let both = |record: InjectionStatus| {
            let scraped = InjectionStatus { annotations: scrape_keys.clone(), ..record.clone() };
            [PreparedStatus::new(record), PreparedStatus::new(scraped)]
        };
        let label = spec.xds.pod_label();
        let status_with_label =
            label.map(|(key, _)| both(InjectionStatus { labels: vec![key.to_owned()], ..record.clone() }));
        let label_literal = label.map(|(_, value)| json_string(value));
        Self { spec, sidecar, json, status: both(record), status_with_label, label_literal }
    }

    /// The status annotation for a pod given this sidecar, and its label too when `adds_label`
    /// (which only a fleet or mesh sidecar does), and the scrape annotations when
    /// `adds_scrape`.
    pub fn status(&self, adds_label: bool, adds_scrape: bool) -> &PreparedStatus {
        let statuses = match (&self.status_with_label, adds_label) {
            (Some(with_label), true) => with_label,
            _ => &self.status,
        };
        &statuses[usize::from(adds_scrape)]
    }

    /// The label's value as a JSON string literal, for a fleet or mesh sidecar.
    pub fn label_literal(&self) -> Option<&str> {
        self.label_literal.as_deref()
    }
}

/// `text` as a JSON string literal. A string serializes whatever it holds.
fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Builds the sidecar for `spec`. Deterministic: the same spec gives byte-identical JSON.
pub fn build(spec: &SidecarSpec) -> Sidecar {
    let ca_sds_path = format!("{CONFIG_DIR}/{CA_SDS_KEY}");
    let identity_sds_path = identity::sds_path();
    let bootstrap = bootstrap(match &spec.xds {
        SidecarXds::None => Xds::None,
        SidecarXds::External(target) => Xds::External(target),
        SidecarXds::Fleet(fleet) => Xds::Operator {
            control_plane: &fleet.control_plane,
            fleet: &fleet.fleet,
            ca_sds_path: &ca_sds_path,
            identity_sds_path: &identity_sds_path,
        },
        SidecarXds::Mesh(mesh) => Xds::Mesh {
            control_plane: &mesh.control_plane,
            namespace: &mesh.namespace,
            ca_sds_path: &ca_sds_path,
            identity_sds_path: &identity_sds_path,
        },
    });
    let mut volume_mounts = vec![VolumeMount {
        name: spec.tmp_volume.clone(),
        mount_path: "/tmp".to_owned(),
        ..Default::default()
    }];
    let mut volumes = vec![Volume {
        name: spec.tmp_volume.clone(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(TMP_SIZE_LIMIT.to_owned())),
            medium: None,
        }),
        ..Default::default()
    }];
    let operator = match &spec.xds {
        SidecarXds::Fleet(fleet) => Some((
            &fleet.ca_volume,
            fleet.config_map.as_str(),
            identity_volume(&fleet.identity_volume, &fleet.envoy, IDENTITY_FILE_MODE),
        )),
        SidecarXds::Mesh(mesh) => Some((
            &mesh.ca_volume,
            identity::MESH_CA_CONFIG_MAP,
            mesh_identity_volume(&mesh.identity_volume, &mesh.service_account),
        )),
        SidecarXds::None | SidecarXds::External(_) => None,
    };
    if let Some((ca_volume, ca_config_map, identity)) = operator {
        // The whole directory, not a subPath: Envoy watches it, so a rotated CA is picked up.
        volume_mounts.push(VolumeMount {
            name: ca_volume.clone(),
            mount_path: CONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
        // Only the CA file, not the fleet's bootstrap. Not optional: Envoy refuses to start
        // without the file, so the pod waits for it rather than crash-looping.
        volumes.push(Volume {
            name: ca_volume.clone(),
            config_map: Some(ConfigMapVolumeSource {
                name: ca_config_map.to_owned(),
                items: Some(vec![KeyToPath {
                    key: CA_SDS_KEY.to_owned(),
                    path: CA_SDS_KEY.to_owned(),
                    mode: None,
                }]),
                ..Default::default()
            }),
            ..Default::default()
        });
        // The client certificate, also a whole watched directory (renewals).
        volume_mounts.push(VolumeMount {
            name: identity.name.clone(),
            mount_path: identity::MOUNT_DIR.to_owned(),
            read_only: Some(true),
            ..Default::default()
        });
        volumes.push(identity);
    }
    let init = match &spec.xds {
        SidecarXds::Mesh(MeshSidecar { capture: Some(capture), .. }) => Some(capture_container(capture)),
        _ => None,
    };
    let container = Container {
        name: CONTAINER_NAME.to_owned(),
        image: Some(spec.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        // `envoy` directly rather than the image's entrypoint script, which may try to switch
        // users; hot restart is off because it needs shared memory and a sidecar never uses it.
        command: Some(vec!["envoy".to_owned()]),
        args: Some(
            [
                "--config-yaml",
                &bootstrap.to_json(),
                "--service-node",
                "$(POD_NAME)",
                "--service-cluster",
                "$(POD_NAMESPACE)",
                "--disable-hot-restart",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        env: Some(proxy::downward_env()),
        ports: Some(vec![proxy::readiness_port()]),
        readiness_probe: Some(proxy::readiness_probe()),
        // A native sidecar holds the application back until it is configured, and is stopped
        // only after the application has exited: nothing is left to drain by then. A regular
        // one stops alongside the application, so it drains first (while the application
        // finishes, its outbound calls still go through).
        startup_probe: spec.native.then(proxy::startup_probe),
        lifecycle: (!spec.native).then(|| proxy::drain_on_stop(proxy::SIDECAR_DRAIN_SECONDS)),
        resources: Some(requirements(&spec.resources)),
        security_context: Some(proxy::security_context()),
        volume_mounts: Some(volume_mounts),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        restart_policy: spec.native.then(|| "Always".to_owned()),
        ..Default::default()
    };
    // Plain data of strings and numbers: serialization cannot fail.
    let container = name_first(serde_json::to_value(container).unwrap_or(Value::Null));
    let init = init.map(|init| name_first(serde_json::to_value(init).unwrap_or(Value::Null)));
    let volumes: Vec<Value> =
        volumes.into_iter().map(|v| name_first(serde_json::to_value(v).unwrap_or(Value::Null))).collect();
    let hash = template_hash(&container, init.as_ref(), &volumes);
    Sidecar { container, init, volumes, hash }
}

/// The volume of the mesh identity Secret of `service_account` (only its SDS file). Required,
/// as a fleet's: the pod waits for it (`ContainerCreating`) until the operator has issued it.
fn mesh_identity_volume(volume_name: &str, service_account: &str) -> Volume {
    Volume {
        name: volume_name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(identity::mesh_secret_name(service_account)),
            items: Some(vec![KeyToPath {
                key: identity::SDS_KEY.to_owned(),
                path: identity::SDS_KEY.to_owned(),
                mode: None,
            }]),
            default_mode: Some(IDENTITY_FILE_MODE),
            optional: Some(false),
        }),
        ..Default::default()
    }
}

/// The init container installing the outbound capture: `envoy-operator mesh-init` in the
/// operator's image, as root with `NET_ADMIN` and `NET_RAW` (what changing the pod's iptables
/// rules takes) and nothing else, in the pod's network namespace only. It runs to completion
/// before any other container starts, the proxy included.
fn capture_container(capture: &CaptureSpec) -> Container {
    let mut args: Vec<String> = [
        "mesh-init",
        "--proxy-uid",
        &proxy::PROXY_UID.to_string(),
        "--outbound-port",
        &proxy::MESH_OUTBOUND_PORT.to_string(),
    ]
    .map(str::to_owned)
    .to_vec();
    if !capture.exclude_ports.is_empty() {
        args.extend(["--exclude-outbound-ports".to_owned(), capture::join(&capture.exclude_ports)]);
    }
    if !capture.exclude_cidrs.is_empty() {
        args.extend(["--exclude-outbound-cidrs".to_owned(), capture::join(&capture.exclude_cidrs)]);
    }
    let quantity = |value: &str| Quantity(value.to_owned());
    Container {
        name: CAPTURE_CONTAINER_NAME.to_owned(),
        image: Some(capture.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec!["envoy-operator".to_owned()]),
        args: Some(args),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), quantity("10m")),
                ("memory".to_owned(), quantity("16Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".to_owned(), quantity("64Mi"))])),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            run_as_user: Some(0),
            run_as_group: Some(0),
            run_as_non_root: Some(false),
            allow_privilege_escalation: Some(false),
            privileged: Some(false),
            read_only_root_filesystem: Some(true),
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_ADMIN".to_owned(), "NET_RAW".to_owned()]),
                drop: Some(vec!["ALL".to_owned()]),
            }),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                localhost_profile: None,
            }),
            ..Default::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    }
}

/// k8s-openapi serializes fields alphabetically; `name` first reads the way people write it.
fn name_first(value: Value) -> Value {
    let Value::Object(mut fields) = value else { return value };
    let mut ordered = serde_json::Map::with_capacity(fields.len());
    if let Some(name) = fields.shift_remove("name") {
        ordered.insert("name".to_owned(), name);
    }
    ordered.extend(fields);
    Value::Object(ordered)
}

fn requirements(resources: &ProxyResources) -> ResourceRequirements {
    let (requests, limits) = resources.as_maps();
    ResourceRequirements {
        requests: (!requests.is_empty()).then_some(requests),
        limits: (!limits.is_empty()).then_some(limits),
        ..Default::default()
    }
}

impl ProxyResources {
    /// Requests and limits as the maps a container's `resources` holds.
    fn as_maps(&self) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
        let map = |cpu: &Option<Quantity>, memory: &Option<Quantity>| {
            [("cpu", cpu), ("memory", memory)]
                .into_iter()
                .filter_map(|(key, value)| value.clone().map(|v| (key.to_owned(), v)))
                .collect::<BTreeMap<_, _>>()
        };
        (map(&self.cpu_request, &self.memory_request), map(&self.cpu_limit, &self.memory_limit))
    }
}

/// A short hash of the exact container, init container and volumes JSON.
fn template_hash(container: &Value, init: Option<&Value>, volumes: &[Value]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(container.to_string().as_bytes());
    if let Some(init) = init {
        hasher.update(b"\ninit ");
        hasher.update(init.to_string().as_bytes());
    }
    for volume in volumes {
        hasher.update(b"\n");
        hasher.update(volume.to_string().as_bytes());
    }
    hasher.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The configured resources with the pod's overrides applied, checked so that no request
/// exceeds its limit (the API server would reject the pod with a less helpful message).
pub fn resolve_resources(
    defaults: &ProxyResources,
    overrides: &Overrides,
) -> Result<ProxyResources, InjectError> {
    let pick = |over: &Option<Quantity>, default: &Option<Quantity>| over.clone().or_else(|| default.clone());
    let resolved = ProxyResources {
        cpu_request: pick(&overrides.cpu_request, &defaults.cpu_request),
        memory_request: pick(&overrides.memory_request, &defaults.memory_request),
        cpu_limit: pick(&overrides.cpu_limit, &defaults.cpu_limit),
        memory_limit: pick(&overrides.memory_limit, &defaults.memory_limit),
    };
    let (requests, limits) = resolved.as_maps();
    if let Some((resource, request, limit)) = quantity::requests_over_limits(&requests, &limits).first() {
        let keys = if *resource == "cpu" {
            (PROXY_CPU_ANNOTATION, PROXY_CPU_LIMIT_ANNOTATION)
        } else {
            (PROXY_MEMORY_ANNOTATION, PROXY_MEMORY_LIMIT_ANNOTATION)
        };
        return Err(InjectError::RequestOverLimit {
            resource: (*resource).to_owned(),
            request: request.0.clone(),
            limit: limit.0.clone(),
            hint: format!("set {} and {} consistently", keys.0, keys.1),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SidecarSpec {
        SidecarSpec {
            image: "envoyproxy/envoy:v1.34.1".to_owned(),
            resources: ProxyResources::default(),
            xds: SidecarXds::None,
            native: false,
            tmp_volume: TMP_VOLUME.to_owned(),
        }
    }

    #[test]
    fn container_is_locked_down_and_probed_on_the_readiness_listener() {
        let sidecar = build(&spec());
        let c = &sidecar.container;
        assert_eq!(c["name"], "envoy");
        assert_eq!(c["securityContext"]["runAsNonRoot"], true);
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(c["securityContext"]["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(c["readinessProbe"]["httpGet"]["port"], 9902);
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.name");
        assert_eq!(c["resources"]["requests"]["cpu"], "100m");
        assert!(c["resources"]["limits"].get("cpu").is_none());
        assert!(c.get("restartPolicy").is_none());
        assert_eq!(c["volumeMounts"][0]["name"], sidecar.volumes[0]["name"]);
        assert_eq!(sidecar.volumes.len(), 1);
        let config: Value = serde_json::from_str(c["args"][1].as_str().unwrap()).unwrap();
        assert_eq!(config["admin"]["address"]["socket_address"]["address"], "127.0.0.1");
        assert!(config.get("dynamic_resources").is_none());
    }

    #[test]
    fn a_native_sidecar_holds_the_application_until_configured_and_a_regular_one_drains() {
        let native = build(&SidecarSpec { native: true, ..spec() }).container;
        assert_eq!(native["startupProbe"]["httpGet"], serde_json::json!({"path": "/ready", "port": 9902}));
        assert!(native.get("lifecycle").is_none(), "stopped after the application: nothing to drain");
        let regular = build(&spec()).container;
        assert!(regular.get("startupProbe").is_none());
        assert_eq!(
            regular["lifecycle"]["preStop"]["exec"]["command"],
            serde_json::json!(proxy::drain_command(proxy::SIDECAR_DRAIN_SECONDS))
        );
    }

    #[test]
    fn hash_follows_the_template() {
        let base = build(&spec());
        assert_eq!(base, build(&spec()), "deterministic");
        let native = build(&SidecarSpec { native: true, ..spec() });
        assert_eq!(native.container["restartPolicy"], "Always");

        assert_ne!(base.hash, native.hash);
        let xds =
            XdsTarget { cluster_name: "xds_cluster".to_owned(), host: "xds.mesh".to_owned(), port: 18000 };
        assert_ne!(base.hash, build(&SidecarSpec { xds: SidecarXds::External(xds), ..spec() }).hash);
        assert_eq!(base.hash.len(), 16);
    }

    #[test]
    fn a_fleet_sidecar_mounts_the_ca_and_identity_files_its_bootstrap_reads() {
        let fleet = FleetSidecar {
            control_plane: ControlPlane { host: "xds.ops.svc".to_owned(), port: 18000 },
            fleet: "shop/edge".to_owned(),
            envoy: "edge".to_owned(),
            config_map: "edge-bootstrap".to_owned(),
            ca_volume: "envoy-xds-ca-2".to_owned(),
            identity_volume: "envoy-xds-identity".to_owned(),
        };
        let sidecar = build(&SidecarSpec { xds: SidecarXds::Fleet(fleet), ..spec() });
        assert_eq!(sidecar.volumes.len(), 3);
        let ca = &sidecar.volumes[1];
        assert_eq!(ca["name"], "envoy-xds-ca-2");
        assert_eq!(ca["configMap"]["name"], "edge-bootstrap");
        assert_eq!(ca["configMap"]["items"], serde_json::json!([{"key": CA_SDS_KEY, "path": CA_SDS_KEY}]));
        let mount = &sidecar.container["volumeMounts"][1];
        assert_eq!(
            (mount["name"].as_str(), mount["readOnly"].as_bool()),
            (Some("envoy-xds-ca-2"), Some(true))
        );
        let config: Value = serde_json::from_str(sidecar.container["args"][1].as_str().unwrap()).unwrap();
        let sds = &config["static_resources"]["clusters"][1]["transport_socket"]["typed_config"]["common_tls_context"]
            ["validation_context_sds_secret_config"]["sds_config"]["path_config_source"];
        assert_eq!(sds["path"], format!("{}/{CA_SDS_KEY}", mount["mountPath"].as_str().unwrap()));
        assert_eq!(config["node"]["metadata"][crate::bootstrap::FLEET_METADATA_KEY], "shop/edge");
        // The fleet's identity: the Secret named after the Envoy, only its SDS file, mounted
        // where the bootstrap reads the client certificate.
        let identity = &sidecar.volumes[2];
        assert_eq!(identity["name"], "envoy-xds-identity");
        assert_eq!(identity["secret"]["secretName"], "edge-xds-identity");
        assert_eq!(
            identity["secret"]["items"],
            serde_json::json!([{"key": identity::SDS_KEY, "path": identity::SDS_KEY}])
        );
        assert_eq!(identity["secret"]["optional"], false);
        let mount = &sidecar.container["volumeMounts"][2];
        assert_eq!(
            (mount["name"].as_str(), mount["mountPath"].as_str()),
            (Some("envoy-xds-identity"), Some(identity::MOUNT_DIR))
        );
        let client = &config["static_resources"]["clusters"][1]["transport_socket"]["typed_config"]["common_tls_context"]
            ["tls_certificate_sds_secret_configs"][0]["sds_config"]["path_config_source"]["path"];
        assert_eq!(client.as_str(), Some(identity::sds_path().as_str()));
        assert_ne!(sidecar.hash, build(&spec()).hash);
    }

    #[test]
    fn requests_over_limits_are_refused() {
        let overrides = Overrides { memory_request: Some(Quantity("1Gi".to_owned())), ..Default::default() };
        let error = resolve_resources(&ProxyResources::default(), &overrides).unwrap_err();
        assert!(error.to_string().contains("memory request 1Gi exceeds the limit 256Mi"), "{error}");
        let raised = Overrides { memory_limit: Some(Quantity("2Gi".to_owned())), ..overrides };
        assert_eq!(
            resolve_resources(&ProxyResources::default(), &raised).unwrap().memory_request.unwrap().0,
            "1Gi"
        );
    }
}
