//! Syntax checks for names, hosts, images and ports. Each returns the reasons a
//! value is invalid (empty when it is valid), in the API server's words where it has them.

use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

use crate::api::patterns;

fn compiled(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("built-in pattern {pattern:?} must compile: {e}"))
}

static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::DNS1123_SUBDOMAIN));
static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::DNS1123_LABEL));
static CLUSTER_NAME: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::CLUSTER_NAME));
static IMAGE_REFERENCE: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::IMAGE_REFERENCE));

/// An RFC 1123 subdomain, as most Kubernetes object names.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 253 {
        reasons.push("must be no more than 253 characters".to_owned());
    }
    if !DNS1123_SUBDOMAIN.is_match(value) {
        reasons.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{}')",
            patterns::DNS1123_SUBDOMAIN
        ));
    }
    reasons
}

/// An RFC 1123 label, as Service names.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 63 {
        reasons.push("must be no more than 63 characters".to_owned());
    }
    if !DNS1123_LABEL.is_match(value) {
        reasons.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', regex used for validation is '{}')",
            patterns::DNS1123_LABEL
        ));
    }
    reasons
}

/// An IANA service name, as port names: at most 15 characters, lowercase alphanumerics and
/// '-', at least one letter, no leading, trailing or doubled '-'.
pub fn iana_svc_name(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 15 {
        reasons.push("must be no more than 15 characters".to_owned());
    }
    if !value.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        reasons.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned());
    }
    if value.contains("--") {
        reasons.push("must not contain consecutive hyphens".to_owned());
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        reasons.push("must contain at least one letter (a-z)".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        reasons.push("must not begin or end with a hyphen".to_owned());
    }
    reasons
}

/// A host Envoy can resolve: an IP address, or a DNS name (case-insensitive).
pub fn host(value: &str) -> Vec<String> {
    if value.parse::<IpAddr>().is_ok() {
        return Vec::new();
    }
    let lower = value.to_ascii_lowercase();
    if value.len() <= 253 && DNS1123_SUBDOMAIN.is_match(&lower) {
        return Vec::new();
    }
    vec!["must be a DNS name (e.g. 'xds-service.default') or an IP address".to_owned()]
}

/// A TCP port number.
pub fn port(value: i32) -> Vec<String> {
    if (1..=65535).contains(&value) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_owned()]
    }
}

/// A name Envoy accepts for a cluster.
pub fn cluster_name(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.is_empty() {
        reasons.push("must not be empty".to_owned());
    } else if value.len() > 128 || !CLUSTER_NAME.is_match(value) {
        reasons.push("must be at most 128 characters of letters, digits, '_', '.' and '-'".to_owned());
    }
    reasons
}

/// A container image reference: `[registry[:port]/]repository[:tag][@digest]`.
pub fn image(value: &str) -> Vec<String> {
    if value.len() <= 512 && IMAGE_REFERENCE.is_match(value) {
        Vec::new()
    } else {
        vec!["must be an image reference such as 'envoyproxy/envoy:v1.34.1' or 'registry:5000/envoy@sha256:<digest>' (lowercase repository, optional tag and digest)".to_owned()]
    }
}

/// Whether an image reference names a mutable tag: none at all (implicitly `latest`), or `latest`.
pub fn image_is_unpinned(value: &str) -> bool {
    if value.contains('@') {
        return false;
    }
    let last_segment = value.rsplit('/').next().unwrap_or(value);
    match last_segment.split_once(':') {
        None => true,
        Some((_, tag)) => tag == "latest",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_and_labels() {
        assert!(dns1123_subdomain("example-foo").is_empty());
        assert!(dns1123_subdomain("a.b-c.d").is_empty());
        assert!(!dns1123_subdomain("Example").is_empty());
        assert!(!dns1123_subdomain("-a").is_empty());
        assert!(!dns1123_subdomain("").is_empty());
        assert!(!dns1123_subdomain(&"a".repeat(254)).is_empty());
        assert!(dns1123_label(&"a".repeat(63)).is_empty());
        assert!(!dns1123_label(&"a".repeat(64)).is_empty());
        assert!(!dns1123_label("a.b").is_empty());
    }

    #[test]
    fn hosts() {
        for ok in ["xds-service.default", "XDS.example.com", "10.0.0.1", "::1", "fd00::10", "localhost"] {
            assert!(host(ok).is_empty(), "{ok} should be a valid host");
        }
        for bad in ["", "a b", "xds_service", "-x.default", "http://xds"] {
            assert!(!host(bad).is_empty(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn port_names() {
        assert!(iana_svc_name("http").is_empty());
        assert!(iana_svc_name("h2c-8080").is_empty());
        for bad in ["8080", "a--b", "-http", "http-", "HTTP", "a-very-long-port-name"] {
            assert!(!iana_svc_name(bad).is_empty(), "{bad} should be rejected");
        }
    }

    #[test]
    fn images() {
        for ok in [
            "envoyproxy/envoy:v1.34.1",
            "envoy",
            "registry.local:5000/team/envoy:1.0",
            "ghcr.io/org/envoy@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert!(image(ok).is_empty(), "{ok} should be a valid image");
        }
        for bad in ["", "Envoy:1", "envoy:", "envoy::1", "envoy:v1 ", "https://envoy", "envoy@sha256:short"] {
            assert!(!image(bad).is_empty(), "{bad:?} should be rejected");
        }
        assert!(image_is_unpinned("envoy"));
        assert!(image_is_unpinned("registry:5000/envoy:latest"));
        assert!(image_is_unpinned("registry:5000/envoy"), "a registry port is not a tag");
        assert!(!image_is_unpinned("envoy:v1.34.1"));
    }
}
