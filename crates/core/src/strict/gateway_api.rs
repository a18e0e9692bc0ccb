//! The fields the Gateway API's CRDs declare for the kinds the operator reads: GatewayClass,
//! Gateway and HTTPRoute (`v1`), ReferenceGrant (`v1beta1`), in the standard channel that
//! README installs (`standard-install.yaml`, v1.3.0) and v1.4.0's, which adds only a rule's
//! `name`. The experimental channel's fields (`sessionPersistence`, `retry`, `cors`,
//! `externalAuth`, `backendTLS`, `allowedListeners`, `frontendValidation`) are not among them:
//! the standard CRDs prune them, so strict decoding refuses them.
//!
//! Field names only: types, patterns and limits are the CRDs' schema to check, and the API
//! server reports them as other errors.

use super::Fields::{self, Any, List, Object};

/// The fields of the `spec` of `kind` at `api_version`, `None` for any other kind.
pub fn spec(api_version: &str, kind: &str) -> Option<Fields> {
    match (api_version, kind) {
        ("gateway.networking.k8s.io/v1", "GatewayClass") => Some(GATEWAY_CLASS_SPEC),
        ("gateway.networking.k8s.io/v1", "Gateway") => Some(GATEWAY_SPEC),
        ("gateway.networking.k8s.io/v1", "HTTPRoute") => Some(HTTP_ROUTE_SPEC),
        ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant") => Some(REFERENCE_GRANT_SPEC),
        _ => None,
    }
}

const GATEWAY_CLASS_SPEC: Fields = Object(&[
    ("controllerName", Any),
    ("parametersRef", Object(&[("group", Any), ("kind", Any), ("name", Any), ("namespace", Any)])),
    ("description", Any),
]);

const GATEWAY_SPEC: Fields = Object(&[
    ("gatewayClassName", Any),
    ("listeners", List(&LISTENER)),
    ("addresses", List(&Object(&[("type", Any), ("value", Any)]))),
    (
        "infrastructure",
        Object(&[
            ("labels", Any),
            ("annotations", Any),
            ("parametersRef", Object(&[("group", Any), ("kind", Any), ("name", Any)])),
        ]),
    ),
]);

const LISTENER: Fields = Object(&[
    ("name", Any),
    ("hostname", Any),
    ("port", Any),
    ("protocol", Any),
    (
        "tls",
        Object(&[
            ("mode", Any),
            (
                "certificateRefs",
                List(&Object(&[("group", Any), ("kind", Any), ("name", Any), ("namespace", Any)])),
            ),
            ("options", Any),
        ]),
    ),
    (
        "allowedRoutes",
        Object(&[
            ("namespaces", Object(&[("from", Any), ("selector", LABEL_SELECTOR)])),
            ("kinds", List(&Object(&[("group", Any), ("kind", Any)]))),
        ]),
    ),
]);

const LABEL_SELECTOR: Fields = Object(&[
    ("matchLabels", Any),
    ("matchExpressions", List(&Object(&[("key", Any), ("operator", Any), ("values", Any)]))),
]);

const HTTP_ROUTE_SPEC: Fields =
    Object(&[("parentRefs", List(&PARENT_REFERENCE)), ("hostnames", Any), ("rules", List(&HTTP_ROUTE_RULE))]);

const PARENT_REFERENCE: Fields = Object(&[
    ("group", Any),
    ("kind", Any),
    ("namespace", Any),
    ("name", Any),
    ("sectionName", Any),
    ("port", Any),
]);

const HTTP_ROUTE_RULE: Fields = Object(&[
    // Standard from v1.4.0.
    ("name", Any),
    ("matches", List(&HTTP_ROUTE_MATCH)),
    ("filters", List(&HTTP_ROUTE_FILTER)),
    ("backendRefs", List(&HTTP_BACKEND_REF)),
    ("timeouts", Object(&[("request", Any), ("backendRequest", Any)])),
]);

const NAME_VALUE_MATCH: Fields = Object(&[("type", Any), ("name", Any), ("value", Any)]);

const HTTP_ROUTE_MATCH: Fields = Object(&[
    ("path", Object(&[("type", Any), ("value", Any)])),
    ("headers", List(&NAME_VALUE_MATCH)),
    ("queryParams", List(&NAME_VALUE_MATCH)),
    ("method", Any),
]);

const BACKEND_OBJECT_REFERENCE: Fields =
    Object(&[("group", Any), ("kind", Any), ("name", Any), ("namespace", Any), ("port", Any)]);

const HTTP_BACKEND_REF: Fields = Object(&[
    ("group", Any),
    ("kind", Any),
    ("name", Any),
    ("namespace", Any),
    ("port", Any),
    ("weight", Any),
    ("filters", List(&HTTP_ROUTE_FILTER)),
]);

const HEADER_MODIFIER: Fields = Object(&[
    ("set", List(&Object(&[("name", Any), ("value", Any)]))),
    ("add", List(&Object(&[("name", Any), ("value", Any)]))),
    ("remove", Any),
]);

const PATH_MODIFIER: Fields = Object(&[("type", Any), ("replaceFullPath", Any), ("replacePrefixMatch", Any)]);

const HTTP_ROUTE_FILTER: Fields = Object(&[
    ("type", Any),
    ("requestHeaderModifier", HEADER_MODIFIER),
    ("responseHeaderModifier", HEADER_MODIFIER),
    (
        "requestMirror",
        Object(&[
            ("backendRef", BACKEND_OBJECT_REFERENCE),
            ("percent", Any),
            ("fraction", Object(&[("numerator", Any), ("denominator", Any)])),
        ]),
    ),
    (
        "requestRedirect",
        Object(&[
            ("scheme", Any),
            ("hostname", Any),
            ("path", PATH_MODIFIER),
            ("port", Any),
            ("statusCode", Any),
        ]),
    ),
    ("urlRewrite", Object(&[("hostname", Any), ("path", PATH_MODIFIER)])),
    ("extensionRef", Object(&[("group", Any), ("kind", Any), ("name", Any)])),
]);

const REFERENCE_GRANT_SPEC: Fields = Object(&[
    ("from", List(&Object(&[("group", Any), ("kind", Any), ("namespace", Any)]))),
    ("to", List(&Object(&[("group", Any), ("kind", Any), ("name", Any)]))),
]);
