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
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::HOSTNAME));
static HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::HEADER_NAME));
static HEADER_VALUE: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::HEADER_VALUE));
static PATH_CHARACTERS: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::PATH_CHARACTERS));
static REPLACEMENT_PATH: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::REPLACEMENT_PATH));
static GATEWAY_DURATION: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::GATEWAY_DURATION));
static API_GROUP: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::API_GROUP));
static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::QUALIFIED_NAME));
static KIND: LazyLock<Regex> = LazyLock::new(|| compiled(patterns::KIND));

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

/// A label or annotation key: an optional RFC 1123 subdomain prefix and `/`, then a name of at
/// most 63 characters (the API server's "qualified name").
pub fn qualified_name(value: &str) -> Vec<String> {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    let mut reasons = Vec::new();
    if let Some(prefix) = prefix {
        reasons.extend(dns1123_subdomain(prefix).into_iter().map(|reason| format!("prefix part {reason}")));
    }
    if name.len() > 63 {
        reasons.push("name part must be no more than 63 characters".to_owned());
    }
    if !QUALIFIED_NAME.is_match(name) {
        reasons.push(format!(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '{}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            patterns::QUALIFIED_NAME
        ));
    }
    reasons
}

/// A label value: empty, or at most 63 characters as a key's name part.
pub fn label_value(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 63 {
        reasons.push("must be no more than 63 characters".to_owned());
    }
    if !value.is_empty() && !QUALIFIED_NAME.is_match(value) {
        reasons.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (regex used for validation is '{}')",
            patterns::QUALIFIED_NAME
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

/// A Gateway API hostname: an RFC 1123 subdomain, optionally with a leading `*.` label.
pub fn route_hostname(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 253 {
        reasons.push("must be no more than 253 characters".to_owned());
    }
    if value.parse::<IpAddr>().is_ok() {
        reasons.push("must be a DNS name, not an IP address".to_owned());
    } else if !HOSTNAME.is_match(value) {
        reasons.push(format!(
            "a hostname must be a lowercase RFC 1123 subdomain, optionally prefixed by a wildcard label '*.' (e.g. 'shop.example.com' or '*.example.com'; no IP addresses), regex used for validation is '{}'",
            patterns::HOSTNAME
        ));
    }
    reasons
}

/// An HTTP header or query parameter name (an RFC 7230 token).
pub fn header_name(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 256 {
        reasons.push("must be no more than 256 characters".to_owned());
    }
    if !HEADER_NAME.is_match(value) {
        reasons.push(format!(
            "must be an HTTP header name (letters, digits and !#$%&'*+-.^_`|~), regex used for validation is '{}'",
            patterns::HEADER_NAME
        ));
    }
    reasons
}

/// A header value Envoy accepts to add to a request.
pub fn header_value(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 4096 {
        reasons.push("must be no more than 4096 characters".to_owned());
    }
    if !HEADER_VALUE.is_match(value) {
        reasons
            .push("must be printable ASCII characters, words separated by a single space or tab".to_owned());
    }
    reasons
}

/// An `Exact` or `PathPrefix` path, with Gateway API's rules (and words).
pub fn http_path(value: &str) -> Vec<String> {
    const TYPES: &str = "when type one of ['Exact', 'PathPrefix']";
    let mut reasons = Vec::new();
    if value.len() > 1024 {
        reasons.push("must be no more than 1024 characters".to_owned());
    }
    if !value.starts_with('/') {
        reasons.push(format!("value must be an absolute path and start with '/' {TYPES}"));
    }
    // A `#` is left to the character rule, an empty value to the absolute-path rule: one
    // reason per fault, as the CRD's rules say it.
    for sequence in ["//", "/./", "/../", "%2f", "%2F"] {
        if value.contains(sequence) {
            reasons.push(format!("must not contain '{sequence}' {TYPES}"));
        }
    }
    for suffix in ["/..", "/."] {
        if value.ends_with(suffix) {
            reasons.push(format!("must not end with '{suffix}' {TYPES}"));
        }
    }
    if !value.is_empty() && !PATH_CHARACTERS.is_match(value) {
        reasons.push(format!(
            "must only contain valid characters (matching {}) for types ['Exact', 'PathPrefix']",
            patterns::PATH_CHARACTERS
        ));
    }
    reasons
}

/// A path a redirect or rewrite puts in place; `allow_empty` for `replacePrefixMatch`.
pub fn replacement_path(value: &str, allow_empty: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > 1024 {
        reasons.push("must be no more than 1024 characters".to_owned());
    }
    if value.is_empty() && !allow_empty {
        reasons.push("must not be empty".to_owned());
    } else if !REPLACEMENT_PATH.is_match(value) {
        reasons.push(format!(
            "must be an absolute path of valid characters, regex used for validation is '{}'",
            patterns::REPLACEMENT_PATH
        ));
    }
    reasons
}

/// A regular expression Envoy compiles: RE2's syntax and limits, as Envoy applies them
/// ([`super::re2`]).
pub fn regular_expression(value: &str) -> Vec<String> {
    match super::re2::judge(value) {
        Ok(()) => Vec::new(),
        Err(refusal) => vec![format!("must be a regular expression Envoy's RE2 compiles: {refusal}")],
    }
}

/// A Kubernetes API group: empty (the core group) or an RFC 1123 subdomain.
pub fn api_group(value: &str) -> Vec<String> {
    if value.len() <= 253 && API_GROUP.is_match(value) {
        Vec::new()
    } else {
        vec!["must be empty (the core group) or a lowercase RFC 1123 subdomain".to_owned()]
    }
}

/// A Kubernetes kind name.
pub fn kind(value: &str) -> Vec<String> {
    if !value.is_empty() && value.len() <= 63 && KIND.is_match(value) {
        Vec::new()
    } else {
        vec![format!("must be a kind name, regex used for validation is '{}'", patterns::KIND)]
    }
}

/// A Gateway API duration (`1h30m`, `500ms`, `0s`).
pub fn gateway_duration(value: &str) -> Result<std::time::Duration, String> {
    let invalid = || {
        format!(
            "must be a duration of up to four parts of up to 5 digits and a unit h, m, s or ms (e.g. '10s', '1m30s', '500ms'), regex used for validation is '{}'",
            patterns::GATEWAY_DURATION
        )
    };
    if !GATEWAY_DURATION.is_match(value) {
        return Err(invalid());
    }
    let mut total_millis: u64 = 0;
    let mut rest = value;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let number: u64 = rest[..digits].parse().map_err(|_| invalid())?;
        rest = &rest[digits..];
        let (unit_millis, unit_len) = if rest.starts_with("ms") {
            (1, 2)
        } else {
            match rest.as_bytes().first() {
                Some(b'h') => (3_600_000, 1),
                Some(b'm') => (60_000, 1),
                Some(b's') => (1_000, 1),
                _ => return Err(invalid()),
            }
        };
        rest = &rest[unit_len..];
        // At most four parts of at most 99999 hours each: far from overflowing.
        total_millis += number * unit_millis;
    }
    Ok(std::time::Duration::from_millis(total_millis))
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

    #[test]
    fn route_syntax() {
        for ok in ["shop.example.com", "*.example.com", "localhost"] {
            assert!(route_hostname(ok).is_empty(), "{ok}");
        }
        for bad in ["Shop.example.com", "*", "a.*.com", "10.0.0.1", "-a.com", "*example.com"] {
            assert!(!route_hostname(bad).is_empty(), "{bad:?} should be rejected");
        }
        assert!(header_name("X-Request-Id").is_empty());
        assert!(!header_name(":method").is_empty() && !header_name("a b").is_empty());
        assert!(header_value("a b\tc").is_empty());
        assert!(!header_value("a\nb").is_empty() && !header_value("a  b").is_empty());
        assert!(http_path("/foo/bar-1.html").is_empty());
        assert_eq!(
            http_path("foo//x"),
            [
                "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
                "must not contain '//' when type one of ['Exact', 'PathPrefix']"
            ]
        );
        assert!(
            !http_path("/a/.").is_empty() && !http_path("/a%2Fb").is_empty() && !http_path("/a?b").is_empty()
        );
        assert_eq!(
            http_path("/a#b"),
            [
                "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']"
            ]
        );
        assert_eq!(
            http_path(""),
            ["value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"]
        );
        assert!(replacement_path("", true).is_empty() && !replacement_path("", false).is_empty());
        assert!(!replacement_path("relative", true).is_empty() && replacement_path("/v2", false).is_empty());
        assert!(regular_expression("/api/v[0-9]+").is_empty());
        assert!(
            regular_expression("/api/(v")
                .iter()
                .all(|r| r.starts_with("must be a regular expression Envoy's RE2 compiles"))
        );
        assert!(!regular_expression("(").is_empty());
        assert!(
            api_group("").is_empty()
                && api_group("example.com").is_empty()
                && !api_group("Example").is_empty()
        );
        assert!(kind("Service").is_empty() && !kind("").is_empty() && !kind("a/b").is_empty());
    }

    #[test]
    fn gateway_durations() {
        use std::time::Duration;
        assert_eq!(gateway_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(gateway_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(gateway_duration("1m500ms"), Ok(Duration::from_millis(60_500)));
        assert_eq!(gateway_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(
            gateway_duration("99999h99999m99999s99999ms"),
            Ok(Duration::from_millis(359_996_400_000 + 5_999_940_000 + 99_999_000 + 99_999))
        );
        for bad in ["", "10", "1.5s", "1d", "100000s", "1h1h1h1h1h", "-1s", "1 s"] {
            assert!(gateway_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
