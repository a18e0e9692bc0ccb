//! A proxy's workload identity: the name it proves with the client certificate the operator's
//! CA issues, as a SPIFFE ID in the certificate's URI SAN, and where that certificate lives.
//!
//! Two kinds:
//! - a fleet's (`spiffe://<trust domain>/ns/<namespace>/envoy/<name>`): a `kubernetes.io/tls`
//!   Secret in the fleet's namespace, mounted as a directory into the fleet's pods and the
//!   sidecars that name the Envoy;
//! - a mesh sidecar's, one per ServiceAccount (`spiffe://<trust domain>/ns/<namespace>/sa/<name>`,
//!   Istio's form): the Secret [`mesh_secret_name`] in the pod's namespace, beside the
//!   namespace's CA ConfigMap [`MESH_CA_CONFIG_MAP`]. Every mesh sidecar of a namespace is
//!   served the same configuration, under the key [`mesh_fleet_key`].
//!
//! The xDS server serves a connection only what its certificate names, so the name is parsed
//! strictly: one form per kind, no percent-encoding, no query or fragment, segments that are
//! Kubernetes names.

use std::fmt;

use crate::names::{MESH_IDENTITY_SECRET_SUFFIX, XDS_IDENTITY_SECRET_SUFFIX};

/// The SPIFFE trust domain of the identities the operator issues. Each install has its own CA,
/// so two installs in one cluster share the name but not the trust.
pub const TRUST_DOMAIN: &str = "cluster.local";

/// Where proxies mount the identity Secret: a whole directory, so a renewal reaches running
/// proxies (Envoy watches it) without a restart.
pub const MOUNT_DIR: &str = "/etc/envoy-xds-identity";
/// Key of the SDS file (client certificate and key) in the Secret, and so its file name.
pub const SDS_KEY: &str = "xds-identity.yaml";
/// Name of the SDS secret holding the proxy's client certificate.
pub const SDS_SECRET_NAME: &str = "envoy_operator_xds_identity";

/// Path of the SDS file in a proxy.
pub fn sds_path() -> String {
    format!("{MOUNT_DIR}/{SDS_KEY}")
}

/// The identity Secret of the Envoy `envoy_name`.
pub fn secret_name(envoy_name: &str) -> String {
    format!("{envoy_name}{XDS_IDENTITY_SECRET_SUFFIX}")
}

/// The name under which the control plane serves a namespace's mesh sidecars, in place of an
/// Envoy's: `:` is in no Kubernetes object name, so no Envoy can have it.
pub const MESH_FLEET_NAME: &str = ":mesh";

/// The fleet key the control plane serves the mesh sidecars of `namespace` under:
/// `<namespace>/:mesh`. The one constructor of that key: the authorizer serves it to a mesh
/// identity of `namespace`, and the publishing of mesh routes writes the sidecars' snapshot
/// under it.
pub fn mesh_fleet_key(namespace: &str) -> String {
    format!("{namespace}/{MESH_FLEET_NAME}")
}

/// The namespace of a mesh fleet key ([`mesh_fleet_key`]); `None` for a fleet's key.
pub fn mesh_namespace(fleet_key: &str) -> Option<&str> {
    fleet_key.strip_suffix(MESH_FLEET_NAME)?.strip_suffix('/').filter(|namespace| !namespace.is_empty())
}

/// The ConfigMap, in every namespace with mesh sidecars, holding the control plane's CA file
/// ([`crate::children::envoy::CA_SDS_KEY`]) that they mount. Operator-managed.
pub const MESH_CA_CONFIG_MAP: &str = "envoy-mesh-xds-ca";

/// The identity Secret of the mesh sidecars of the ServiceAccount `service_account`:
/// `<serviceaccount>-mesh-identity`, or, for a name too long for that, its first characters
/// and a hash of the whole (a Secret's name has at most 253). Its suffix is no fleet identity
/// Secret's (`-xds-identity`), so the two never clash.
pub fn mesh_secret_name(service_account: &str) -> String {
    const MAX: usize = 253;
    let name = format!("{service_account}{MESH_IDENTITY_SECRET_SUFFIX}");
    if name.len() <= MAX {
        return name;
    }
    use sha2::Digest;
    let hash: String =
        sha2::Sha256::digest(service_account.as_bytes()).iter().take(5).map(|b| format!("{b:02x}")).collect();
    // The suffix, a dash and 10 hex digits; the prefix cut where it leaves a valid name.
    let keep = MAX - MESH_IDENTITY_SECRET_SUFFIX.len() - hash.len() - 1;
    let prefix = service_account[..keep].trim_end_matches(['-', '.']);
    format!("{prefix}-{hash}{MESH_IDENTITY_SECRET_SUFFIX}")
}

/// What kind of workload an identity names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IdentityKind {
    /// The proxies of the Envoy `name` (its fleet's pods and the sidecars naming it).
    Envoy,
    /// The mesh sidecars of the pods running as the ServiceAccount `name`.
    ServiceAccount,
}

impl IdentityKind {
    /// The SPIFFE ID's segment before the name.
    fn segment(self) -> &'static str {
        match self {
            Self::Envoy => "envoy",
            Self::ServiceAccount => "sa",
        }
    }
}

/// The identity a client certificate proves: a fleet (the Envoy `name` in `namespace`) or,
/// with [`IdentityKind::ServiceAccount`], the mesh sidecars of a ServiceAccount.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FleetIdentity {
    pub namespace: String,
    pub name: String,
    pub kind: IdentityKind,
}

impl FleetIdentity {
    /// The identity of the fleet of the Envoy `name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into(), kind: IdentityKind::Envoy }
    }

    /// The identity of the mesh sidecars running as the ServiceAccount `service_account`.
    pub fn mesh(namespace: impl Into<String>, service_account: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: service_account.into(), kind: IdentityKind::ServiceAccount }
    }

    /// Whether it is a mesh sidecar's.
    pub fn is_mesh(&self) -> bool {
        self.kind == IdentityKind::ServiceAccount
    }

    /// `spiffe://<trust domain>/ns/<namespace>/envoy/<name>`, or `…/sa/<name>` for a mesh
    /// sidecar's.
    pub fn spiffe_id(&self, trust_domain: &str) -> String {
        format!("spiffe://{trust_domain}/ns/{}/{}/{}", self.namespace, self.kind.segment(), self.name)
    }

    /// The identity a SPIFFE ID of `trust_domain` names; `None` for anything else.
    pub fn from_spiffe_id(uri: &str, trust_domain: &str) -> Option<Self> {
        let path = uri.strip_prefix("spiffe://")?.strip_prefix(trust_domain)?;
        let mut segments = path.strip_prefix('/')?.split('/');
        let (Some("ns"), Some(namespace), Some(kind), Some(name), None) =
            (segments.next(), segments.next(), segments.next(), segments.next(), segments.next())
        else {
            return None;
        };
        let kind = match kind {
            "envoy" => IdentityKind::Envoy,
            "sa" => IdentityKind::ServiceAccount,
            _ => return None,
        };
        // A ServiceAccount's name is any DNS-1123 subdomain as Kubernetes checks it (whose labels
        // may be longer than 63); an Envoy's, as its CRD's validation does.
        let valid_name = match kind {
            IdentityKind::Envoy => is_dns_subdomain(name),
            IdentityKind::ServiceAccount => is_object_name(name),
        };
        (is_dns_label(namespace) && valid_name).then(|| Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            kind,
        })
    }

    /// The fleet key the control plane serves this identity under: `<namespace>/<name>` for a
    /// fleet, [`mesh_fleet_key`] for a mesh sidecar (whatever its ServiceAccount).
    pub fn fleet_key(&self) -> String {
        match self.kind {
            IdentityKind::Envoy => format!("{}/{}", self.namespace, self.name),
            IdentityKind::ServiceAccount => mesh_fleet_key(&self.namespace),
        }
    }
}

impl fmt::Display for FleetIdentity {
    /// `<namespace>/<name>` for a fleet, `<namespace>/sa/<name>` for a mesh sidecar.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            IdentityKind::Envoy => write!(f, "{}/{}", self.namespace, self.name),
            IdentityKind::ServiceAccount => write!(f, "{}/sa/{}", self.namespace, self.name),
        }
    }
}

/// What was last issued to a fleet: by which CA (its fingerprint), and when to renew. Renewal
/// comes at half the certificate's life, so a proxy always holds a certificate with days to
/// spare even when the operator is down for a while.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedIdentity {
    /// A fingerprint of the issuing CA certificate.
    pub issuer: String,
    /// Unix seconds after which the certificate is renewed.
    pub renew_after: i64,
}

impl IssuedIdentity {
    /// The annotation's value: `<issuer>;renew-after=<unix seconds>`.
    pub fn annotation(&self) -> String {
        format!("{};renew-after={}", self.issuer, self.renew_after)
    }

    /// The record an annotation holds; `None` when it is not one (a new certificate is then
    /// issued, which is always safe).
    pub fn parse(annotation: &str) -> Option<Self> {
        let (issuer, renew_after) = annotation.split_once(";renew-after=")?;
        let valid_issuer =
            !issuer.is_empty() && issuer.len() <= 128 && issuer.bytes().all(|b| b.is_ascii_hexdigit());
        Some(Self { issuer: issuer.to_owned(), renew_after: renew_after.parse().ok()? })
            .filter(|_| valid_issuer)
    }

    /// Whether a certificate must be issued now: none recorded, one from another CA, or one
    /// past its renewal time.
    pub fn is_due(recorded: Option<&Self>, current_issuer: &str, now_unix: i64) -> bool {
        recorded.is_none_or(|recorded| recorded.issuer != current_issuer || now_unix >= recorded.renew_after)
    }
}

/// An RFC 1123 label: what a namespace name is.
fn is_dns_label(value: &str) -> bool {
    (1..=63).contains(&value.len())
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-')
}

/// A name as Kubernetes checks most objects' (`IsDNS1123Subdomain`): at most 253 lowercase
/// letters, digits, `-` and `.`, starting and ending with a letter or digit.
pub fn is_object_name(value: &str) -> bool {
    let alphanumeric = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    value.len() <= 253
        && alphanumeric(value.bytes().next())
        && alphanumeric(value.bytes().last())
        && value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// An RFC 1123 subdomain: what an object name is.
fn is_dns_subdomain(value: &str) -> bool {
    value.len() <= 253 && value.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spiffe_id_round_trips() {
        let identity = FleetIdentity::new("shop", "edge.v2");
        let id = identity.spiffe_id(TRUST_DOMAIN);
        assert_eq!(id, "spiffe://cluster.local/ns/shop/envoy/edge.v2");
        assert_eq!(FleetIdentity::from_spiffe_id(&id, TRUST_DOMAIN), Some(identity));
    }

    #[test]
    fn only_the_one_form_of_the_trust_domain_names_a_fleet() {
        for uri in [
            "spiffe://other.local/ns/shop/envoy/edge",
            "spiffe://cluster.localx/ns/shop/envoy/edge",
            "spiffe://cluster.local/ns/shop/envoy/edge/extra",
            "spiffe://cluster.local/ns/shop/pod/edge",
            "spiffe://cluster.local/ns/shop/sa/",
            "spiffe://cluster.local/ns/shop/sa/web/x",
            "spiffe://cluster.local/ns/shop/sa/Web",
            "spiffe://cluster.local/ns//envoy/edge",
            "spiffe://cluster.local/ns/Shop/envoy/edge",
            "spiffe://cluster.local/ns/shop/envoy/edge%2Fx",
            "spiffe://cluster.local/ns/shop/envoy/edge?x=1",
            "spiffe://cluster.local/ns/shop/envoy/",
            "https://cluster.local/ns/shop/envoy/edge",
            "",
        ] {
            assert_eq!(FleetIdentity::from_spiffe_id(uri, TRUST_DOMAIN), None, "{uri}");
        }
    }

    #[test]
    fn the_issued_record_round_trips_and_says_when_to_renew() {
        let record = IssuedIdentity { issuer: "ab12".into(), renew_after: 1_000 };
        assert_eq!(IssuedIdentity::parse(&record.annotation()), Some(record.clone()));
        for garbage in
            ["", "ab12", "ab12;renew-after=", "zz;renew-after=5", ";renew-after=5", "ab;renew-after=x"]
        {
            assert_eq!(IssuedIdentity::parse(garbage), None, "{garbage}");
        }
        assert!(IssuedIdentity::is_due(None, "ab12", 0));
        assert!(!IssuedIdentity::is_due(Some(&record), "ab12", 999));
        assert!(IssuedIdentity::is_due(Some(&record), "ab12", 1_000));
        assert!(IssuedIdentity::is_due(Some(&record), "cd34", 0), "a rotated CA reissues at once");
    }

    #[test]
    fn a_mesh_identity_names_its_service_account_and_is_served_its_namespaces_key() {
        let mesh = FleetIdentity::mesh("shop", "web");
        let id = mesh.spiffe_id(TRUST_DOMAIN);
        assert_eq!(id, "spiffe://cluster.local/ns/shop/sa/web");
        assert_eq!(FleetIdentity::from_spiffe_id(&id, TRUST_DOMAIN), Some(mesh.clone()));
        assert!(mesh.is_mesh() && !FleetIdentity::new("shop", "web").is_mesh());
        // Never the fleet of an Envoy of the same name.
        assert_ne!(mesh, FleetIdentity::new("shop", "web"));
        assert_eq!(mesh.fleet_key(), "shop/:mesh");
        assert_eq!(mesh.fleet_key(), mesh_fleet_key("shop"));
        assert_eq!(mesh.to_string(), "shop/sa/web");
        assert_eq!(mesh_namespace("shop/:mesh"), Some("shop"));
        for key in ["shop/edge", "/:mesh", ":mesh", "shop/x:mesh"] {
            assert_eq!(mesh_namespace(key), None, "{key}");
        }
        // No Envoy's name can be the mesh's: an Envoy's fleet key never is a mesh key.
        assert!(!is_dns_subdomain(MESH_FLEET_NAME));
    }

    #[test]
    fn mesh_secret_names_fit_and_never_end_as_a_fleets() {
        assert_eq!(mesh_secret_name("web"), "web-mesh-identity");
        assert!(!mesh_secret_name("web").ends_with(XDS_IDENTITY_SECRET_SUFFIX));
        let long = "a".repeat(253);
        let name = mesh_secret_name(&long);
        assert!(name.len() <= 253, "{}", name.len());
        assert!(is_object_name(&name), "{name}");
        assert_ne!(name, mesh_secret_name(&format!("{}b", "a".repeat(252))));
        let dotted = format!("{}.{}", "a".repeat(227), "b".repeat(25));
        assert!(is_object_name(&mesh_secret_name(&dotted)), "{}", mesh_secret_name(&dotted));
        // A long ServiceAccount name is a valid identity too.
        let mesh = FleetIdentity::mesh("shop", "a".repeat(100));
        assert_eq!(FleetIdentity::from_spiffe_id(&mesh.spiffe_id(TRUST_DOMAIN), TRUST_DOMAIN), Some(mesh));
    }

    #[test]
    fn names_follow_the_envoy() {
        assert_eq!(secret_name("edge"), "edge-xds-identity");
        assert_eq!(sds_path(), "/etc/envoy-xds-identity/xds-identity.yaml");
        assert_eq!(FleetIdentity::new("shop", "edge").fleet_key(), "shop/edge");
    }
}
