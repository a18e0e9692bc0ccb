//! A Gateway's listeners, judged: their protocol, the container port they bind, the route kinds
//! they take, their certificates (HTTPS), and their conflicts with the listeners sharing their
//! port. Each gets Gateway API's `Accepted`, `ResolvedRefs` and `Conflicted`; whether it is
//! served follows from them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;

use super::conditions::{
    ConditionState, REASON_ACCEPTED, REASON_HOSTNAME_CONFLICT, REASON_INVALID_CERTIFICATE_REF,
    REASON_INVALID_ROUTE_KINDS, REASON_NO_CONFLICTS, REASON_PORT_UNAVAILABLE, REASON_PROTOCOL_CONFLICT,
    REASON_REF_NOT_PERMITTED, REASON_RESOLVED_REFS, REASON_UNSUPPORTED_PROTOCOL, state,
};
use super::grants::{self, Reference};
use super::hostnames::listener_domain;
use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};
use crate::api::gateway::{
    self as api, GROUP, Gateway, Listener, ReferenceGrant, RouteGroupKind, SecretObjectReference,
};
use crate::ir::{self, Domain};

/// The route kinds HTTP and HTTPS listeners take, in the order `supportedKinds` lists them.
pub const HTTP_ROUTE: &str = "HTTPRoute";
pub const GRPC_ROUTE: &str = "GRPCRoute";
const HTTP_KINDS: &[&str] = &[HTTP_ROUTE, GRPC_ROUTE];
/// The route kind TLS (passthrough) listeners take.
pub const TLS_ROUTE: &str = "TLSRoute";
const TLS_KINDS: &[&str] = &[TLS_ROUTE];
/// The type of the Secrets a listener's certificates come from.
use crate::names::TLS_SECRET_TYPE;
/// Ports below this one are privileged: listeners on them bind [`PRIVILEGED_PORT_OFFSET`]
/// higher in the proxies' containers, so the proxies run as non-root (Envoy Gateway's mapping).
pub const FIRST_UNPRIVILEGED_PORT: i32 = 1024;
pub const PRIVILEGED_PORT_OFFSET: i32 = 10000;

/// The protocols the operator serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    Http,
    Https,
    /// `TLS` in mode `Passthrough`: connections sent on by SNI, never decrypted.
    Tls,
}

impl Protocol {
    fn of(protocol: &str) -> Option<Self> {
        match protocol {
            "HTTP" => Some(Self::Http),
            "HTTPS" => Some(Self::Https),
            "TLS" => Some(Self::Tls),
            _ => None,
        }
    }

    /// The prefix of the fleet's port names.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
            Self::Tls => "tls",
        }
    }

    /// The route kinds its listeners take.
    fn kinds(self) -> &'static [&'static str] {
        match self {
            Self::Http | Self::Https => HTTP_KINDS,
            Self::Tls => TLS_KINDS,
        }
    }
}

/// One listener of a Gateway, judged.
#[derive(Clone, Debug)]
pub struct JudgedListener {
    pub name: String,
    pub hostname: Option<String>,
    /// The Gateway's port (the fleet's Service port).
    pub port: i32,
    /// `None`: a protocol the operator does not serve.
    pub protocol: Option<Protocol>,
    /// The port the proxies bind for it.
    pub container_port: i32,
    pub allowed_routes: Option<api::AllowedRoutes>,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub accepted: ConditionState,
    pub resolved_refs: ConditionState,
    pub conflicted: ConditionState,
    /// Whether its certificates (HTTPS) all resolve; always for HTTP.
    pub certificates_resolve: bool,
    /// HTTPS: the certificates it presents, in the order of its `certificateRefs`.
    pub certificates: Vec<ir::TlsSecret>,
}

impl JudgedListener {
    /// Whether the fleet's Service exposes its port: accepted and not in conflict.
    pub fn exposed(&self) -> bool {
        self.accepted.status && !self.conflicted.status
    }

    /// Whether the proxies serve it: exposed, with its certificates, for some route kind.
    pub fn served(&self) -> bool {
        self.exposed() && self.certificates_resolve && !self.supported_kinds.is_empty()
    }

    /// Whether routes of `kind` may attach to it.
    pub fn takes(&self, kind: &str) -> bool {
        self.supported_kinds.iter().any(|supported| supported.kind == kind)
    }

    pub fn domain(&self) -> Domain {
        listener_domain(self.hostname.as_deref())
    }

    /// The fleet's name for its port: `http-80`, `https-443` (an IANA service name).
    pub fn port_name(&self) -> String {
        let scheme = self.protocol.map_or("tcp", Protocol::scheme);
        format!("{scheme}-{}", self.port)
    }
}

/// Judges every listener of `gateway`, in the spec's order.
pub fn judge(
    gateway: &Gateway,
    secrets: &[Arc<Secret>],
    grants: &[Arc<ReferenceGrant>],
) -> Vec<JudgedListener> {
    let namespace = gateway.metadata.namespace.as_deref().unwrap_or_default();
    let mut listeners: Vec<JudgedListener> = gateway
        .spec
        .listeners
        .iter()
        .map(|listener| judge_one(namespace, listener, secrets, grants))
        .collect();
    refuse_shared_container_ports(&mut listeners);
    mark_conflicts(&mut listeners);
    listeners
}

fn judge_one(
    namespace: &str,
    listener: &Listener,
    secrets: &[Arc<Secret>],
    grants: &[Arc<ReferenceGrant>],
) -> JudgedListener {
    let protocol = Protocol::of(&listener.protocol);
    let container_port = if listener.port < FIRST_UNPRIVILEGED_PORT {
        listener.port + PRIVILEGED_PORT_OFFSET
    } else {
        listener.port
    };
    let (supported_kinds, kinds_problem) = route_kinds(protocol, listener.allowed_routes.as_ref());
    let mut accepted = state(true, REASON_ACCEPTED, "the listener is valid");
    if protocol.is_none() {
        accepted = state(
            false,
            REASON_UNSUPPORTED_PROTOCOL,
            format!("protocol {:?} is not supported: HTTP, HTTPS and TLS are", listener.protocol),
        );
    } else if container_port == ADMIN_PORT || container_port == READINESS_PORT {
        accepted = state(
            false,
            REASON_PORT_UNAVAILABLE,
            format!(
                "port {} is served on the proxies' port {container_port}, reserved for their admin interface ({ADMIN_PORT}) and readiness ({READINESS_PORT})",
                listener.port
            ),
        );
    } else if protocol == Some(Protocol::Https)
        && let Some(mode) = listener.tls.as_ref().and_then(|tls| tls.mode.as_deref())
        && mode != "Terminate"
    {
        accepted = state(
            false,
            REASON_UNSUPPORTED_PROTOCOL,
            format!("tls.mode {mode:?} is not supported on an HTTPS listener: it terminates TLS (Terminate)"),
        );
    } else if protocol == Some(Protocol::Tls)
        && let mode = listener.tls.as_ref().and_then(|tls| tls.mode.as_deref()).unwrap_or("Terminate")
        && mode != "Passthrough"
    {
        // TLS terminated in front of TCP backends would be TLSRoute's extended `Terminate`
        // mode: not implemented. Its routes attach nowhere rather than to plain TCP.
        accepted = state(
            false,
            REASON_UNSUPPORTED_PROTOCOL,
            format!(
                "tls.mode {mode:?} is not supported on a TLS listener: it passes TLS through (Passthrough); HTTPS terminates it"
            ),
        );
    }
    let (certificates, certificate_problem) = match protocol {
        Some(Protocol::Https) => certificates(namespace, listener, secrets, grants),
        _ => (Vec::new(), None),
    };
    let certificates_resolve = certificate_problem.is_none();
    let resolved_refs = match (certificate_problem, kinds_problem) {
        (Some(problem), _) => problem,
        (None, Some(problem)) => problem,
        (None, None) => state(true, REASON_RESOLVED_REFS, "every reference of the listener resolves"),
    };
    JudgedListener {
        name: listener.name.clone(),
        hostname: listener.hostname.clone(),
        port: listener.port,
        protocol,
        container_port,
        allowed_routes: listener.allowed_routes.clone(),
        supported_kinds,
        accepted,
        resolved_refs,
        conflicted: state(false, REASON_NO_CONFLICTS, "no other listener conflicts with it"),
        certificates_resolve,
        certificates,
    }
}

/// The route kinds a listener takes, and the `ResolvedRefs` problem of those it asks for and
/// the operator does not implement.
fn route_kinds(
    protocol: Option<Protocol>,
    allowed: Option<&api::AllowedRoutes>,
) -> (Vec<RouteGroupKind>, Option<ConditionState>) {
    let group_kind = |kind: &str| RouteGroupKind { group: Some(GROUP.to_owned()), kind: kind.to_owned() };
    let Some(protocol) = protocol else { return (Vec::new(), None) };
    let kinds = protocol.kinds();
    let asked = allowed.map(|allowed| allowed.kinds.as_slice()).unwrap_or_default();
    if asked.is_empty() {
        return (kinds.iter().map(|kind| group_kind(kind)).collect(), None);
    }
    let mut supported: Vec<RouteGroupKind> = Vec::new();
    let mut unsupported = Vec::new();
    for kind in asked {
        let group = kind.group.as_deref().unwrap_or(GROUP);
        if group == GROUP && kinds.contains(&kind.kind.as_str()) {
            if !supported.iter().any(|known| known.kind == kind.kind) {
                supported.push(group_kind(&kind.kind));
            }
        } else {
            unsupported.push(if group.is_empty() {
                kind.kind.clone()
            } else {
                format!("{}.{group}", kind.kind)
            });
        }
    }
    let problem = (!unsupported.is_empty()).then(|| {
        state(
            false,
            REASON_INVALID_ROUTE_KINDS,
            format!(
                "route kinds not supported on protocol {}: {} (supported: {})",
                protocol.scheme().to_uppercase(),
                unsupported.join(", "),
                kinds.iter().map(|kind| format!("{kind}.{GROUP}")).collect::<Vec<_>>().join(", ")
            ),
        )
    });
    (supported, problem)
}

/// An HTTPS listener's certificates, or the `ResolvedRefs` problem of the first that does not
/// resolve.
fn certificates(
    namespace: &str,
    listener: &Listener,
    secrets: &[Arc<Secret>],
    grants: &[Arc<ReferenceGrant>],
) -> (Vec<ir::TlsSecret>, Option<ConditionState>) {
    let references = listener.tls.as_ref().map(|tls| tls.certificate_refs.as_slice()).unwrap_or_default();
    if references.is_empty() {
        let problem =
            state(false, REASON_INVALID_CERTIFICATE_REF, "an HTTPS listener needs tls.certificateRefs");
        return (Vec::new(), Some(problem));
    }
    let mut resolved = Vec::new();
    for (i, reference) in references.iter().enumerate() {
        match certificate(namespace, reference, secrets, grants) {
            Ok(secret) => resolved.push(secret),
            Err((reason, message)) => {
                return (
                    Vec::new(),
                    Some(state(false, reason, format!("tls.certificateRefs[{i}]: {message}"))),
                );
            }
        }
    }
    (resolved, None)
}

fn certificate(
    namespace: &str,
    reference: &SecretObjectReference,
    secrets: &[Arc<Secret>],
    grants: &[Arc<ReferenceGrant>],
) -> Result<ir::TlsSecret, (&'static str, String)> {
    let invalid = |message: String| (REASON_INVALID_CERTIFICATE_REF, message);
    let group = reference.group.as_deref().unwrap_or_default();
    let kind = reference.kind.as_deref().unwrap_or("Secret");
    if !group.is_empty() || kind != "Secret" {
        let group_kind = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        return Err(invalid(format!(
            "{:?} is a {group_kind}: certificates come from Secrets (kind Secret, group \"\")",
            reference.name
        )));
    }
    let secret_namespace = reference.namespace.as_deref().unwrap_or(namespace);
    let name = reference.name.as_str();
    let allowed = grants::permitted(
        grants,
        &Reference {
            from_group: GROUP,
            from_kind: "Gateway",
            from_namespace: namespace,
            to_group: "",
            to_kind: "Secret",
            to_namespace: secret_namespace,
            to_name: name,
        },
    );
    if !allowed {
        return Err((
            REASON_REF_NOT_PERMITTED,
            format!(
                "Secret {secret_namespace}/{name}: no ReferenceGrant in namespace {secret_namespace:?} allows Gateways of namespace {namespace:?} to reference it"
            ),
        ));
    }
    let Some(secret) = secrets.iter().find(|secret| {
        secret.metadata.namespace.as_deref() == Some(secret_namespace)
            && secret.metadata.name.as_deref() == Some(name)
    }) else {
        return Err(invalid(format!("Secret {secret_namespace}/{name} not found")));
    };
    if secret.type_.as_deref() != Some(TLS_SECRET_TYPE) {
        return Err(invalid(format!(
            "Secret {secret_namespace}/{name} is of type {:?}, not {TLS_SECRET_TYPE}",
            secret.type_.as_deref().unwrap_or_default()
        )));
    }
    let pem = |key: &str, label: fn(&str) -> bool, what: &str| -> Result<String, (&'static str, String)> {
        let bytes = secret.data.as_ref().and_then(|data| data.get(key)).map(|bytes| bytes.0.as_slice());
        let text = bytes.and_then(|bytes| std::str::from_utf8(bytes).ok()).unwrap_or_default();
        if crate::pem::labels(text).iter().any(|block| label(block)) {
            Ok(text.to_owned())
        } else {
            Err(invalid(format!("Secret {secret_namespace}/{name}: {key} holds no PEM {what}")))
        }
    };
    let certificate_chain = pem(crate::names::CERT_KEY, |label| label == "CERTIFICATE", "certificate")?;
    let private_key = pem(crate::names::KEY_KEY, |label| label.ends_with("PRIVATE KEY"), "private key")?;
    Ok(ir::TlsSecret { name: format!("{secret_namespace}/{name}"), certificate_chain, private_key })
}

/// Listeners on different Gateway ports that would bind the same container port (80 and
/// 10080): the first keeps it.
fn refuse_shared_container_ports(listeners: &mut [JudgedListener]) {
    let mut owners: BTreeMap<i32, i32> = BTreeMap::new();
    for listener in listeners.iter_mut().filter(|l| l.accepted.status) {
        let owner = *owners.entry(listener.container_port).or_insert(listener.port);
        if owner != listener.port {
            listener.accepted = state(
                false,
                REASON_PORT_UNAVAILABLE,
                format!(
                    "port {} would be served on the proxies' port {}, which port {owner} already uses",
                    listener.port, listener.container_port
                ),
            );
        }
    }
}

/// Listeners sharing a port conflict when their protocols differ, or when their protocols are
/// the same and so are their hostnames.
fn mark_conflicts(listeners: &mut [JudgedListener]) {
    let mut by_port: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, listener) in listeners.iter().enumerate().filter(|(_, l)| l.protocol.is_some()) {
        by_port.entry(listener.port).or_default().push(i);
    }
    for indices in by_port.values() {
        let protocols: BTreeSet<Protocol> = indices.iter().filter_map(|&i| listeners[i].protocol).collect();
        if protocols.len() > 1 {
            for &i in indices {
                let port = listeners[i].port;
                listeners[i].conflicted = state(
                    true,
                    REASON_PROTOCOL_CONFLICT,
                    if protocols == BTreeSet::from([Protocol::Https, Protocol::Tls]) {
                        // Possible by SNI (Envoy Gateway does it); not implemented yet.
                        format!(
                            "listeners with different protocols share port {port}: an HTTPS and a TLS passthrough listener are not served on one port, give them each their own"
                        )
                    } else {
                        format!("listeners with different protocols share port {port}")
                    },
                );
            }
            continue;
        }
        for &i in indices {
            let same_hostname = indices
                .iter()
                .filter(|&&j| j != i)
                .find(|&&j| listeners[j].hostname == listeners[i].hostname)
                .map(|&j| listeners[j].name.clone());
            if let Some(other) = same_hostname {
                let hostname = listeners[i].hostname.clone().unwrap_or_else(|| "(any)".to_owned());
                listeners[i].conflicted = state(
                    true,
                    REASON_HOSTNAME_CONFLICT,
                    format!("listener {other:?} has the same port, protocol and hostname {hostname}"),
                );
            }
        }
    }
}
