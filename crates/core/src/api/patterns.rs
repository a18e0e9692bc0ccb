//! Regular expressions shared by the CRD schema (`pattern`) and the rule engine, so the two
//! enforce the very same syntax. They use only syntax common to Go's RE2 (the API server) and
//! Rust's `regex`.

/// RFC 1123 subdomain (lowercase alphanumerics, `-` and `.`), as Kubernetes object names.
pub const DNS1123_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// RFC 1123 label, as Service names and other single-segment names.
pub const DNS1123_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// The name part of a label or annotation key, and a non-empty label value: at most 63
/// alphanumerics, `-`, `_` and `.`, starting and ending with an alphanumeric.
pub const QUALIFIED_NAME: &str = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";

/// IANA service name, as container and Service port names.
pub const IANA_SVC_NAME: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// An xDS host: a DNS name (case-insensitive), an IPv4 address, or an IPv6 address. The
/// schema keeps this loose; the rule engine parses IP addresses properly.
pub const XDS_HOST: &str =
    r"^([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|[0-9A-Fa-f:.]+)$";

/// An Envoy cluster name: what Envoy accepts in configuration and shows in its stats.
pub const CLUSTER_NAME: &str = r"^[A-Za-z0-9_.-]+$";

/// A container image reference (`[registry[:port]/]path[:tag][@digest]`), after the
/// grammar of the distribution reference library, lowercase repository path.
pub const IMAGE_REFERENCE: &str = r"^(([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?|\[[0-9a-fA-F:]+\](:[0-9]+)?)/)?[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$";

/// A Gateway API hostname: an RFC 1123 subdomain, optionally prefixed by a wildcard label
/// (`*.example.com`). IP addresses are not hostnames here.
pub const HOSTNAME: &str = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// An HTTP header (or query parameter) name: an RFC 7230 token.
pub const HEADER_NAME: &str = r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$";

/// A header value Envoy may add to a request: printable US-ASCII, words separated by a single
/// space or tab (Gateway API's pattern; Envoy refuses control characters in added headers).
pub const HEADER_VALUE: &str = r"^[!-~]+([\t ]?[!-~]+)*$";

/// The characters of an `Exact` or `PathPrefix` path (RFC 3986 `pchar`s and `/`).
pub const PATH_CHARACTERS: &str = r"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$";

/// A path a redirect or rewrite puts in place: absolute, of [`PATH_CHARACTERS`]; for
/// `replacePrefixMatch` it may also be empty.
pub const REPLACEMENT_PATH: &str = r"^(/(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})*)?$";

/// A Gateway API duration (GEP-2257): up to four `<number><unit>` parts, units `h`, `m`, `s`
/// and `ms`, e.g. `1h30m` or `500ms`.
pub const GATEWAY_DURATION: &str = r"^([0-9]{1,5}(h|m|s|ms)){1,4}$";

/// An API group: empty (the core group) or an RFC 1123 subdomain.
pub const API_GROUP: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A Kubernetes kind, e.g. `Service`.
pub const KIND: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
