//! The Envoy sidecar injector: one pure function, [`inject`], from a raw pod to a JSON Patch
//! (or a reason to leave the pod alone), called by the mutating webhook and by the offline
//! `inject` command alike.
//!
//! The xDS server of the sidecar's bootstrap comes from, in order: the pod annotation
//! `sidecar.example.com/xds`, the `Envoy` named by `sidecar.example.com/envoy` in the pod's
//! namespace, the operator's default; with none, the bootstrap has only the admin interface.
//! A named Envoy without `spec.xds` is served by the operator's control plane
//! ([`InjectConfig::control_plane`]): the sidecar gets that Envoy's configuration, trusting the
//! CA of its bootstrap ConfigMap, and the pod the fleet label the control plane checks.
//!
//! A pod naming nothing, where the operator runs its control plane and has no default xDS
//! server, gets a **mesh sidecar**: its namespace's mesh configuration from the control plane
//! ([`crate::identity::mesh_fleet_key`]), the identity of its ServiceAccount, and (unless it
//! opts out) the init container capturing its outbound TCP ([`crate::capture`]).

pub mod annotations;
pub mod config;
pub mod decision;
pub mod limits;
pub mod lookup;
mod patch;
pub mod pod;
pub mod sidecar;
pub mod status;
pub mod uninject;
pub mod workload;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use json_patch::Patch;
use serde_json::Value;

use self::annotations::{ENVOY, Overrides, XDS};
pub use self::config::{InjectConfig, ProxyResources};
pub use self::decision::{Skip, SkipReason};
pub use self::lookup::{EnvoyCatalog, EnvoyLookup, EnvoyXds, ListenerPort, NoEnvoys};
use self::pod::PodView;
use self::sidecar::{
    CA_VOLUME, CAPTURE_CONTAINER_NAME, CONTAINER_NAME, CaptureSpec, FleetSidecar, IDENTITY_VOLUME,
    MeshSidecar, PreparedSidecar, SidecarSpec, SidecarXds, TMP_VOLUME,
};
pub use self::status::InjectionStatus;
use crate::bootstrap::{OPERATOR_XDS_CLUSTER, XdsTarget};
use crate::names::{FLEET_LABEL, MESH_SIDECAR_LABEL};

/// What injection made of a pod. The patch is a [`Patch`] to apply, or (from
/// [`Injector::inject_json`]) its JSON text, ready to send.
#[derive(Clone, Debug, PartialEq)]
pub enum Injection<P = Patch> {
    /// The pod gets a sidecar: apply `patch` to the pod as received.
    Patched { patch: P, summary: Box<Summary> },
    /// The pod is left as it is (an empty patch), for this reason.
    Skipped(Skip),
}

/// What was injected, for logs, notes and tests.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// The record written to the status annotation.
    pub status: InjectionStatus,
    /// The xDS server of the bootstrap, if any, and where it came from.
    pub xds: Option<XdsTarget>,
    pub xds_source: XdsSource,
    /// The fleet (`<namespace>/<Envoy>`, or a mesh sidecar's [`crate::identity::mesh_fleet_key`])
    /// whose configuration the operator's control plane serves the sidecar, when it does.
    pub fleet: Option<String>,
    /// Whether the pod's outbound TCP is captured (a mesh sidecar's init container).
    pub capture: bool,
    /// Whether the sidecar is a native sidecar (init container with `restartPolicy: Always`).
    pub native: bool,
    /// Things worth telling the user (the webhook returns them as admission warnings, which
    /// `kubectl` prints): an unknown `sidecar.example.com/` annotation, a volume name that was
    /// taken, an Envoy without an xDS server. At most [`MAX_NOTES`].
    pub notes: Vec<String>,
}

/// Notes (admission warnings) about one pod; more are counted in the last one.
pub const MAX_NOTES: usize = 8;

/// Characters the injector's own admission warnings stay under: the AdmissionResponse API asks
/// to "limit warnings to 120 characters if possible" (the API server may cut those over 256).
pub const MAX_WARNING_CHARS: usize = 120;

/// The note on a sidecar with no xDS server to take its configuration from (no Envoy named, no
/// annotation, no default of the operator's): it starts with only its admin interface.
pub const NO_CONFIGURATION: &str = "sidecar serves nothing: annotate sidecar.example.com/envoy=<Envoy>, or label sidecar.example.com/inject=false";

/// Where the bootstrap's xDS server came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XdsSource {
    /// The `sidecar.example.com/xds` annotation.
    Annotation,
    /// The `Envoy` of this name in the pod's namespace.
    Envoy(String),
    /// The operator's default.
    Default,
    /// The operator's control plane, as a mesh sidecar of the pod's namespace, proving the
    /// pod's ServiceAccount (named here).
    Mesh { service_account: String },
    /// Nowhere: an admin-only bootstrap.
    None,
}

/// Why a pod cannot be injected: the webhook denies it with this message, the offline
/// command reports it and exits non-zero.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InjectError {
    #[error("cannot inject a sidecar: {0}")]
    Malformed(String),

    #[error("annotation {key}: invalid value {value:?}: {reason}")]
    InvalidAnnotation { key: &'static str, value: String, reason: String },

    #[error("sidecar {resource} request {request} exceeds the limit {limit}: {hint}")]
    RequestOverLimit { resource: String, request: String, limit: String, hint: String },

    #[error(
        "annotation {ENVOY}: no Envoy {name:?} in namespace {namespace} (create it first, or remove the annotation)"
    )]
    UnknownEnvoy { namespace: String, name: String },

    #[error(
        "annotation {ENVOY}: namespace {namespace} is not watched by this operator (--watch-namespace {watched}), so it cannot serve Envoy {name:?} of {namespace}: run the pod in {watched}, name an xDS server with {XDS}, or remove the annotation"
    )]
    NamespaceNotWatched { namespace: String, name: String, watched: String },

    #[error("annotation {ENVOY}: the pod's namespace is unknown, so Envoy {name:?} cannot be looked up")]
    NamespaceUnknown { name: String },

    #[error(
        "the pod already has a container named {name:?} that the injector did not add: rename it, or opt the pod out with the label sidecar.example.com/inject=false"
    )]
    ContainerNameTaken { name: String },

    #[error(
        "the pod has {count} {what}, more than the {limit} the injector handles: opt it out with the label {opt_out}=false"
    )]
    TooLarge { what: &'static str, count: usize, limit: usize, opt_out: &'static str },

    #[error(
        "annotation {ENVOY}: the sidecar would bind port {port} for the listener {listener:?} of Envoy {envoy:?}, and container {container:?} of the pod declares containerPort {port}: give the Envoy's port a targetPort the pod does not use, or remove the annotation"
    )]
    ListenerPortTaken { envoy: String, listener: String, port: i32, container: String },
}

impl InjectError {
    /// Every [`metric_label`](Self::metric_label).
    pub const METRIC_LABELS: [&str; 9] = [
        "malformed",
        "invalid_annotation",
        "request_over_limit",
        "unknown_envoy",
        "namespace_unknown",
        "container_name_taken",
        "too_large",
        "listener_port_taken",
        "namespace_not_watched",
    ];

    /// A short, fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::InvalidAnnotation { .. } => "invalid_annotation",
            Self::RequestOverLimit { .. } => "request_over_limit",
            Self::UnknownEnvoy { .. } => "unknown_envoy",
            Self::NamespaceUnknown { .. } => "namespace_unknown",
            Self::ContainerNameTaken { .. } => "container_name_taken",
            Self::TooLarge { .. } => "too_large",
            Self::ListenerPortTaken { .. } => "listener_port_taken",
            Self::NamespaceNotWatched { .. } => "namespace_not_watched",
        }
    }
}

/// Decides whether `pod` (its raw JSON) gets a sidecar and builds the patch that adds it.
///
/// `namespace` is where the pod is created: the AdmissionRequest's `namespace`, which is
/// authoritative (pods from ReplicaSets have no `metadata.namespace`); `None` falls back to
/// the pod's own. Pure and deterministic: the same pod, configuration and Envoys give the
/// same patch, and a patched pod gives [`SkipReason::AlreadyInjected`]. Builds the sidecar
/// for this one call; an [`Injector`] builds each sidecar once for its configuration.
pub fn inject(
    pod: &Value,
    namespace: Option<&str>,
    config: &InjectConfig,
    envoys: &dyn EnvoyLookup,
) -> Result<Injection, InjectError> {
    plan(pod, namespace, config, envoys, None).map(|planned| planned.render(|plan| plan.patch()))
}

/// Sidecars other than the configuration's own kept at most by an [`Injector`]: enough for the
/// Envoys and overrides a cluster uses, while pods that each ask for something new (their
/// annotations are anyone's to write) cannot grow it.
const RECENT_SIDECARS: usize = 32;

/// The injector of one configuration: [`inject`], with what is the same for every pod built
/// once. The sidecar a pod gets (container, volumes, bootstrap, JSON text, status annotation)
/// depends only on the effective configuration, [`SidecarSpec`]: the configuration's own two
/// (regular and native) are built up front, others (an Envoy's xDS server or fleet, resource
/// overrides, a renamed volume) when first asked for, and kept among the few built last. The
/// configured resources are checked once. What the webhook holds.
#[derive(Debug)]
pub struct Injector {
    config: InjectConfig,
    prepared: Prepared,
}

/// What an [`Injector`] prepared for its configuration.
#[derive(Debug)]
struct Prepared {
    /// [`sidecar::resolve_resources`] for a pod that overrides none.
    resources: Result<ProxyResources, InjectError>,
    /// The sidecars of the configuration itself: regular, then native.
    defaults: [Arc<PreparedSidecar>; 2],
    /// Other sidecars asked for, in the order they were built (the oldest goes first); at
    /// most [`RECENT_SIDECARS`].
    recent: Mutex<VecDeque<Arc<PreparedSidecar>>>,
}

impl Prepared {
    fn new(config: &InjectConfig) -> Self {
        let defaults = [false, true].map(|native| {
            Arc::new(PreparedSidecar::new(SidecarSpec {
                image: config.image.clone(),
                resources: config.resources.clone(),
                xds: config.default_xds.clone().into(),
                native,
                tmp_volume: TMP_VOLUME.to_owned(),
            }))
        });
        Self {
            resources: sidecar::resolve_resources(&config.resources, &Overrides::default()),
            defaults,
            recent: Mutex::new(VecDeque::with_capacity(RECENT_SIDECARS)),
        }
    }

    /// The sidecar of `spec`, built at most once while it stays among the recent ones.
    fn sidecar(&self, spec: SidecarSpec) -> Arc<PreparedSidecar> {
        if let Some(prepared) = self.defaults.iter().find(|prepared| prepared.spec == spec) {
            return Arc::clone(prepared);
        }
        // A poisoned lock only means a review panicked while holding it; the list is whole
        // at every point a panic could come from, so keep using it.
        let cached = self
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|prepared| prepared.spec == spec)
            .cloned();
        if let Some(prepared) = cached {
            return prepared;
        }
        // Built outside the lock: concurrent reviews do not wait on each other's builds.
        let prepared = Arc::new(PreparedSidecar::new(spec));
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        if !recent.iter().any(|other| other.spec == prepared.spec) {
            if recent.len() == RECENT_SIDECARS {
                recent.pop_front();
            }
            recent.push_back(Arc::clone(&prepared));
        }
        prepared
    }
}

impl Injector {
    pub fn new(config: InjectConfig) -> Self {
        let prepared = Prepared::new(&config);
        Self { config, prepared }
    }

    pub fn config(&self) -> &InjectConfig {
        &self.config
    }

    /// Exactly what [`inject`] returns for this configuration.
    pub fn inject(
        &self,
        pod: &Value,
        namespace: Option<&str>,
        envoys: &dyn EnvoyLookup,
    ) -> Result<Injection, InjectError> {
        plan(pod, namespace, &self.config, envoys, Some(&self.prepared))
            .map(|planned| planned.render(|plan| plan.patch()))
    }

    /// [`inject`](Self::inject) with the patch as JSON text, written from the prepared
    /// sidecar's text.
    pub fn inject_json(
        &self,
        pod: &Value,
        namespace: Option<&str>,
        envoys: &dyn EnvoyLookup,
    ) -> Result<Injection<Vec<u8>>, InjectError> {
        plan(pod, namespace, &self.config, envoys, Some(&self.prepared))
            .map(|planned| planned.render(|plan| plan.json()))
    }
}

/// A decision, before the patch is rendered.
enum Planned<'p> {
    Patch(Box<Plan<'p>>),
    Skip(Skip),
}

impl<'p> Planned<'p> {
    fn render<P>(self, patch: impl FnOnce(&Plan<'p>) -> P) -> Injection<P> {
        match self {
            Self::Skip(skip) => Injection::Skipped(skip),
            Self::Patch(plan) => {
                let patch = patch(&plan);
                Injection::Patched { patch, summary: plan.summary }
            }
        }
    }
}

/// Everything the patch needs: the pod's shape and the sidecar, prepared with its status.
struct Plan<'p> {
    view: PodView<'p>,
    sidecar: Arc<PreparedSidecar>,
    /// Whether the pod is given the fleet label, which it does not carry yet.
    adds_label: bool,
    /// Whether the pod is given Prometheus' scrape annotations (it has none of its own).
    adds_scrape: bool,
    summary: Box<Summary>,
}

impl Plan<'_> {
    fn patch(&self) -> Patch {
        let status = &self.sidecar.status(self.adds_label, self.adds_scrape).annotation;
        let label = self.sidecar.spec.xds.pod_label().filter(|_| self.adds_label);
        let additions = patch::Additions { native: self.summary.native, label, scrape: self.adds_scrape };
        patch::sidecar_patch(&self.view, &self.sidecar.sidecar, status, &additions)
    }

    fn json(&self) -> Vec<u8> {
        let status = &self.sidecar.status(self.adds_label, self.adds_scrape).literal;
        let key = self.sidecar.spec.xds.pod_label().map(|(key, _)| key);
        let label = key.zip(self.sidecar.label_literal()).filter(|_| self.adds_label);
        let additions = patch::Additions { native: self.summary.native, label, scrape: self.adds_scrape };
        patch::sidecar_patch_json(&self.view, &self.sidecar.json, status, &additions)
    }
}

/// The decision and the sidecar for `pod`; `prepared` holds an [`Injector`]'s work done once,
/// `None` builds everything for this call. Either way, the same outcome.
fn plan<'p>(
    pod: &'p Value,
    namespace: Option<&str>,
    config: &InjectConfig,
    envoys: &dyn EnvoyLookup,
    prepared: Option<&Prepared>,
) -> Result<Planned<'p>, InjectError> {
    let view = PodView::new(pod)?;
    let namespace = namespace.filter(|ns| !ns.is_empty()).or_else(|| view.namespace());
    if let Some(skip) = decision::skip(&view, namespace, config) {
        return Ok(Planned::Skip(skip));
    }
    // Before anything is built for the pod.
    limits::check(&view)?;

    let overrides = Overrides::parse(view.annotations)?;
    if view.has_container(CONTAINER_NAME) {
        return Err(InjectError::ContainerNameTaken { name: CONTAINER_NAME.to_owned() });
    }
    let mut notes = annotations::warnings(view.annotations);
    let (mut xds, xds_source, listeners) =
        resolve_xds(&view, &overrides, namespace, config, envoys, &mut notes)?;
    let mesh = matches!(xds, SidecarXds::Mesh(_));
    if let SidecarXds::Mesh(MeshSidecar { capture: Some(_), .. }) = &xds {
        if view.has_container(CAPTURE_CONTAINER_NAME) {
            return Err(InjectError::ContainerNameTaken { name: CAPTURE_CONTAINER_NAME.to_owned() });
        }
        if let Some(skip) = mesh_port_taken(&view) {
            return Ok(Planned::Skip(skip));
        }
    }
    if !mesh && overrides.has_mesh_settings() {
        notes.push(format!(
            "annotations {}, {} and {} ignored: the sidecar is no mesh sidecar",
            annotations::MESH_CAPTURE,
            annotations::MESH_EXCLUDE_PORTS,
            annotations::MESH_EXCLUDE_CIDRS
        ));
    }
    if xds_source == XdsSource::None {
        notes.insert(0, NO_CONFIGURATION.to_owned());
    }
    let resources = match prepared {
        Some(prepared) if !overrides.has_resources() => prepared.resources.clone()?,
        _ => sidecar::resolve_resources(&config.resources, &overrides)?,
    };
    let native = native_sidecar(&view, &overrides, config, mesh, &mut notes);
    if let SidecarXds::Mesh(MeshSidecar { capture: Some(_), .. }) = &xds
        && !native
        && view.init_containers.is_some_and(|init| !init.is_empty())
    {
        notes.push(format!(
            "the pod's init containers run before its (regular) sidecar: their outbound TCP is captured and refused; exclude their ports with {}",
            annotations::MESH_EXCLUDE_PORTS
        ));
    }
    if let (SidecarXds::Fleet(fleet), Some(taken)) = (&xds, listener_port_taken(&view, &listeners, native)) {
        return Err(InjectError::ListenerPortTaken {
            envoy: fleet.envoy.clone(),
            listener: taken.listener,
            port: taken.port,
            container: crate::bounded::echo(&taken.container).into_owned(),
        });
    }
    // Prometheus finds the proxy's statistics by the conventional annotations, unless the pod
    // has its own: those say where the application's are, and are never overwritten.
    let adds_scrape = !view.has_annotation_prefix(annotations::SCRAPE_PREFIX);
    let taken = view.volume_names();
    // The sidecar's own names (`envoy-tmp-…`, `envoy-xds-ca-…`) never clash with each other.
    let tmp_volume = free_volume_name(&taken, TMP_VOLUME, &mut notes);
    let mut adds_label = false;
    match &mut xds {
        SidecarXds::Fleet(fleet) => {
            fleet.ca_volume = free_volume_name(&taken, CA_VOLUME, &mut notes);
            fleet.identity_volume = free_volume_name(&taken, IDENTITY_VOLUME, &mut notes);
            adds_label = needs_fleet_label(&view, &fleet.envoy)?;
        }
        SidecarXds::Mesh(mesh) => {
            mesh.ca_volume = free_volume_name(&taken, CA_VOLUME, &mut notes);
            mesh.identity_volume = free_volume_name(&taken, IDENTITY_VOLUME, &mut notes);
            // The operator selects mesh pods by the key alone: a value of the pod's own stays.
            adds_label = view.label(MESH_SIDECAR_LABEL).is_none();
        }
        SidecarXds::None | SidecarXds::External(_) => {}
    }
    let notes = crate::bounded::capped(notes, MAX_NOTES, |n| format!("and {n} more notes"));

    let operator_target = |control_plane: &crate::bootstrap::ControlPlane| XdsTarget {
        cluster_name: OPERATOR_XDS_CLUSTER.to_owned(),
        host: control_plane.host.clone(),
        port: control_plane.port,
    };
    let (target, fleet) = match &xds {
        SidecarXds::None => (None, None),
        SidecarXds::External(target) => (Some(target.clone()), None),
        SidecarXds::Fleet(fleet) => (Some(operator_target(&fleet.control_plane)), Some(fleet.fleet.clone())),
        SidecarXds::Mesh(mesh) => (
            Some(operator_target(&mesh.control_plane)),
            Some(crate::identity::mesh_fleet_key(&mesh.namespace)),
        ),
    };
    let capture = matches!(&xds, SidecarXds::Mesh(MeshSidecar { capture: Some(_), .. }));
    let spec = SidecarSpec { image: config.image.clone(), resources, xds, native, tmp_volume };
    let sidecar = match prepared {
        Some(prepared) => prepared.sidecar(spec),
        None => Arc::new(PreparedSidecar::new(spec)),
    };
    let status = sidecar.status(adds_label, adds_scrape).record.clone();
    let summary = Box::new(Summary { status, xds: target, xds_source, fleet, capture, native, notes });
    Ok(Planned::Patch(Box::new(Plan { view, sidecar, adds_label, adds_scrape, summary })))
}

/// The skip of a mesh sidecar whose outbound listener's port a container running alongside it
/// declares (TCP): both cannot bind it, and the capture would send the application's outbound
/// connections to the application.
fn mesh_port_taken(pod: &PodView<'_>) -> Option<Skip> {
    let port = i64::from(crate::proxy::MESH_OUTBOUND_PORT);
    // Whether native or not: the capture runs before every container.
    let declared = PodView::declared_ports(pod.all_containers()).find(|d| d.tcp && d.port == port)?;
    Some(Skip {
        reason: SkipReason::PortConflict,
        detail: format!(
            "container {} declares port {port}, the mesh sidecar's outbound port",
            crate::bounded::echo(declared.container)
        ),
        warn: true,
    })
}

/// A fleet's listener port that a container running alongside the sidecar declares.
struct TakenPort {
    listener: String,
    port: i32,
    container: String,
}

/// The first of the fleet's `listeners` whose port a container running while the sidecar does
/// declares over TCP (what Envoy's listeners bind; a port declared for UDP or SCTP does not
/// clash). A port the application binds without declaring it cannot be seen here.
fn listener_port_taken(pod: &PodView<'_>, listeners: &[ListenerPort], native: bool) -> Option<TakenPort> {
    if listeners.is_empty() {
        return None;
    }
    PodView::declared_ports(pod.containers_alongside(native)).filter(|declared| declared.tcp).find_map(
        |declared| {
            let listener = listeners.iter().find(|listener| i64::from(listener.port) == declared.port)?;
            Some(TakenPort {
                listener: listener.name.clone(),
                port: listener.port,
                container: declared.container.to_owned(),
            })
        },
    )
}

/// Whether the pod needs the fleet label to be served `envoy`'s configuration: not if it has
/// it already. A pod labelled as another fleet's contradicts its own annotation.
fn needs_fleet_label(pod: &PodView<'_>, envoy: &str) -> Result<bool, InjectError> {
    match pod.label(FLEET_LABEL) {
        Some(value) if value == envoy => Ok(false),
        Some(other) => Err(InjectError::InvalidAnnotation {
            key: ENVOY,
            value: envoy.to_owned(),
            reason: format!(
                "the pod's label {FLEET_LABEL}={other} makes its proxy one of the Envoy {other}: remove the label, or name that Envoy"
            ),
        }),
        None => Ok(true),
    }
}

/// Whether the sidecar is a native one. A pod that runs to completion always gets one (the
/// decision skipped it where the cluster has none); others as their annotation, else the
/// configuration, say, where the cluster has them.
///
/// A mesh sidecar is native by default where the cluster has them: started before the pod's
/// other init containers and the application, and Ready (its startup probe) only once
/// configured, so no container's outbound connection meets a capture with no proxy behind it.
fn native_sidecar(
    pod: &PodView<'_>,
    overrides: &Overrides,
    config: &InjectConfig,
    mesh: bool,
    notes: &mut Vec<String>,
) -> bool {
    let asked = overrides.native_sidecar.unwrap_or(config.native_sidecar || mesh);
    if decision::runs_to_completion(pod) {
        if overrides.native_sidecar == Some(false) {
            notes.push(format!(
                "annotation {}=false ignored: the pod runs to completion, and a regular sidecar would keep it from finishing",
                annotations::NATIVE_SIDECAR
            ));
        }
        return true;
    }
    if asked && !config.native_sidecars_supported {
        if overrides.native_sidecar == Some(true) || config.native_sidecar {
            notes.push("native sidecars need Kubernetes 1.29+: injected as a regular container".to_owned());
        }
        return false;
    }
    asked
}

/// Where the sidecar takes its configuration from, and the listener ports it is then served
/// (a fleet's, none otherwise). The CA volume of a fleet sidecar is named by the caller, once
/// the pod's volume names are known.
fn resolve_xds(
    pod: &PodView<'_>,
    overrides: &Overrides,
    namespace: Option<&str>,
    config: &InjectConfig,
    envoys: &dyn EnvoyLookup,
    notes: &mut Vec<String>,
) -> Result<(SidecarXds, XdsSource, Vec<ListenerPort>), InjectError> {
    if let Some(xds) = &overrides.xds {
        if let Some(name) = &overrides.envoy {
            notes.push(format!("annotation {XDS} takes precedence over {ENVOY}={name}"));
        }
        return Ok((SidecarXds::External(xds.clone()), XdsSource::Annotation, Vec::new()));
    }
    if let Some(name) = &overrides.envoy {
        let namespace = namespace.ok_or_else(|| InjectError::NamespaceUnknown { name: name.clone() })?;
        let xds = envoys.xds_for(namespace, name).ok_or_else(|| match envoys.only_namespace() {
            // An operator watching another namespace cannot know whether the Envoy exists.
            Some(watched) if watched != namespace => InjectError::NamespaceNotWatched {
                namespace: namespace.to_owned(),
                name: name.clone(),
                watched: watched.to_owned(),
            },
            _ => InjectError::UnknownEnvoy { namespace: namespace.to_owned(), name: name.clone() },
        })?;
        let (xds, listeners) = match (xds, &config.control_plane) {
            (EnvoyXds::External(target), _) => (SidecarXds::External(target), Vec::new()),
            (EnvoyXds::ControlPlane { ca_config_map, listeners }, Some(control_plane)) => {
                let fleet = FleetSidecar {
                    control_plane: control_plane.clone(),
                    fleet: format!("{namespace}/{name}"),
                    envoy: name.clone(),
                    config_map: ca_config_map,
                    ca_volume: CA_VOLUME.to_owned(),
                    identity_volume: IDENTITY_VOLUME.to_owned(),
                };
                (SidecarXds::Fleet(fleet), listeners)
            }
            (EnvoyXds::ControlPlane { .. }, None) => {
                notes.push(format!(
                    "Envoy {name} has no spec.xds and the operator serves sidecars no configuration: the sidecar starts with only its admin interface"
                ));
                (SidecarXds::None, Vec::new())
            }
        };
        return Ok((xds, XdsSource::Envoy(name.clone()), listeners));
    }
    match (&config.default_xds, &config.control_plane, namespace) {
        (Some(xds), _, _) => Ok((SidecarXds::External(xds.clone()), XdsSource::Default, Vec::new())),
        (None, Some(control_plane), Some(namespace)) => {
            let service_account = pod.service_account().to_owned();
            let capture = (overrides.mesh_capture != Some(false)).then(|| CaptureSpec {
                image: config.mesh_init_image.clone(),
                exclude_ports: overrides.mesh_exclude_ports.clone(),
                exclude_cidrs: overrides.mesh_exclude_cidrs.clone(),
            });
            let mesh = MeshSidecar {
                control_plane: control_plane.clone(),
                namespace: namespace.to_owned(),
                service_account: service_account.clone(),
                ca_volume: CA_VOLUME.to_owned(),
                identity_volume: IDENTITY_VOLUME.to_owned(),
                capture,
            };
            Ok((SidecarXds::Mesh(mesh), XdsSource::Mesh { service_account }, Vec::new()))
        }
        _ => Ok((SidecarXds::None, XdsSource::None, Vec::new())),
    }
}

/// `base`, or the first of `base-2`, `base-3`… the pod does not use (`taken`). Volumes are
/// internal plumbing, so a clash is resolved rather than denied; the status annotation
/// records the name, so `--uninject` removes the right one.
/// One pass over the volumes (`taken`), then set lookups: a pod with every name up to
/// `envoy-tmp-65536` costs linear time, not quadratic.
fn free_volume_name(taken: &HashSet<&str>, base: &str, notes: &mut Vec<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    // Among the first `taken.len() + 1` candidates at least one is free.
    let name = (2..=taken.len() + 2)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !taken.contains(name.as_str()))
        .unwrap_or_else(|| base.to_owned());
    notes.push(format!("the pod already has a volume {base}: the sidecar's is named {name}"));
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The note names the keys the injector reads, short enough for `kubectl` to show whole.
    #[test]
    fn the_note_on_a_sidecar_without_configuration_says_what_to_do() {
        assert!(NO_CONFIGURATION.contains(&format!("{ENVOY}=")), "{NO_CONFIGURATION}");
        assert!(NO_CONFIGURATION.contains(&format!("{}=false", annotations::INJECT_LABEL)));
        assert!(NO_CONFIGURATION.len() < MAX_WARNING_CHARS);
        let pod = serde_json::json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "web"}]}});
        let Ok(Injection::Patched { summary, .. }) =
            inject(&pod, Some("shop"), &InjectConfig::default(), &NoEnvoys)
        else {
            panic!("injected");
        };
        assert_eq!((summary.xds_source, summary.notes), (XdsSource::None, vec![NO_CONFIGURATION.to_owned()]));
        let default = InjectConfig {
            default_xds: Some(annotations::parse_xds("xds.mesh:18000").unwrap()),
            ..Default::default()
        };
        let Ok(Injection::Patched { summary, .. }) = inject(&pod, Some("shop"), &default, &NoEnvoys) else {
            panic!("injected");
        };
        assert!(summary.notes.is_empty(), "the operator's default xDS server configures it");
    }

    /// The metrics register every label up front, so a denial never creates a series late.
    #[test]
    fn every_error_has_a_listed_metric_label() {
        let errors = [
            InjectError::Malformed(String::new()),
            InjectError::InvalidAnnotation { key: ENVOY, value: String::new(), reason: String::new() },
            InjectError::RequestOverLimit {
                resource: String::new(),
                request: String::new(),
                limit: String::new(),
                hint: String::new(),
            },
            InjectError::UnknownEnvoy { namespace: String::new(), name: String::new() },
            InjectError::NamespaceUnknown { name: String::new() },
            InjectError::ContainerNameTaken { name: String::new() },
            InjectError::TooLarge { what: "volumes", count: 2, limit: 1, opt_out: "x" },
            InjectError::ListenerPortTaken {
                envoy: String::new(),
                listener: String::new(),
                port: 8080,
                container: String::new(),
            },
            InjectError::NamespaceNotWatched {
                namespace: String::new(),
                name: String::new(),
                watched: String::new(),
            },
        ];
        let labels: Vec<_> = errors.iter().map(InjectError::metric_label).collect();
        assert_eq!(labels, InjectError::METRIC_LABELS);
    }

    /// Pods that each ask for a new sidecar (any pod's annotations can) cannot grow what an
    /// injector keeps; one asked for again is the one already built.
    #[test]
    fn an_injector_keeps_a_bounded_number_of_sidecars() {
        let prepared = Prepared::new(&InjectConfig::default());
        let spec = |n: usize| SidecarSpec {
            tmp_volume: format!("{TMP_VOLUME}-{n}"),
            ..prepared.defaults[0].spec.clone()
        };
        for n in 0..RECENT_SIDECARS * 3 {
            prepared.sidecar(spec(n));
        }
        let recent = prepared.recent.lock().unwrap().len();
        assert_eq!(recent, RECENT_SIDECARS);

        let last = spec(RECENT_SIDECARS * 3 - 1);
        assert!(Arc::ptr_eq(&prepared.sidecar(last.clone()), &prepared.sidecar(last)));
        let default = prepared.defaults[1].spec.clone();
        assert!(Arc::ptr_eq(&prepared.sidecar(default), &prepared.defaults[1]));
        // Evicted long ago: built anew, and the same as before.
        assert_eq!(prepared.sidecar(spec(0)).spec, spec(0));
        assert_eq!(prepared.recent.lock().unwrap().len(), RECENT_SIDECARS);
    }
}
