//! A fleet's workload identity: the name its proxies prove with the client certificate the
//! operator's CA issues them, as a SPIFFE ID in the certificate's URI SAN
//! (`spiffe://<trust domain>/ns/<namespace>/envoy/<name>`), and where that certificate lives:
//! a `kubernetes.io/tls` Secret in the fleet's namespace, mounted as a directory into the
//! fleet's pods and the sidecars that name the Envoy.
//!
//! The xDS server serves a connection only the fleet its certificate names, so the name is
//! parsed strictly: one form, no percent-encoding, no query or fragment, segments that are
//! Kubernetes names.

use std::fmt;

use crate::names::XDS_IDENTITY_SECRET_SUFFIX;

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

/// The identity of one fleet: the Envoy `name` in `namespace`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FleetIdentity {
    pub namespace: String,
    pub name: String,
}

impl FleetIdentity {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }

    /// `spiffe://<trust domain>/ns/<namespace>/envoy/<name>`.
    pub fn spiffe_id(&self, trust_domain: &str) -> String {
        format!("spiffe://{trust_domain}/ns/{}/envoy/{}", self.namespace, self.name)
    }

    /// The identity a SPIFFE ID of `trust_domain` names; `None` for anything else.
    pub fn from_spiffe_id(uri: &str, trust_domain: &str) -> Option<Self> {
        let path = uri.strip_prefix("spiffe://")?.strip_prefix(trust_domain)?;
        let mut segments = path.strip_prefix('/')?.split('/');
        let (Some("ns"), Some(namespace), Some("envoy"), Some(name), None) =
            (segments.next(), segments.next(), segments.next(), segments.next(), segments.next())
        else {
            return None;
        };
        (is_dns_label(namespace) && is_dns_subdomain(name)).then(|| Self::new(namespace, name))
    }

    /// The fleet key the control plane serves this identity under (`<namespace>/<name>`).
    pub fn fleet_key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl fmt::Display for FleetIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
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
            "spiffe://cluster.local/ns/shop/sa/edge",
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
    fn names_follow_the_envoy() {
        assert_eq!(secret_name("edge"), "edge-xds-identity");
        assert_eq!(sds_path(), "/etc/envoy-xds-identity/xds-identity.yaml");
        assert_eq!(FleetIdentity::new("shop", "edge").fleet_key(), "shop/edge");
    }
}
