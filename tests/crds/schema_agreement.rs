//! One table of good and bad objects, run through both the rule engine (what the webhooks
//! and the reconcilers enforce) and the generated CRD schema (what the API server enforces
//! when the webhook is down): OpenAPI keywords with `jsonschema`, list-map keys as the API
//! server checks them, CEL `x-kubernetes-validations` with `kube-cel`, and the scale
//! subresource's own check of `spec.replicas` (testkit's `schema::crd_errors`).
//!
//! The invariants: every case gets the verdicts the table expects from each side; the rule
//! engine never accepts what the schema rejects; and what the rule engine accepts, once
//! defaulted, the schema accepts too.

use envoy_operator_core::crd;
use envoy_operator_core::kind::AdmittedKind;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Accept,
    Reject,
}
use Verdict::{Accept, Reject};

struct Case {
    name: &'static str,
    kind: AdmittedKind,
    /// The object's spec; `null` leaves `spec` out.
    spec: Value,
    /// The object's name, when not the kind's usual one.
    object_name: Option<String>,
    old_spec: Option<Value>,
    /// The rule engine's verdict, and for rejections the path of the first field error.
    rules: (Verdict, &'static str),
    schema: Verdict,
}

fn case(
    name: &'static str,
    kind: AdmittedKind,
    spec: Value,
    rules: (Verdict, &'static str),
    schema: Verdict,
) -> Case {
    Case { name, kind, spec, object_name: None, old_spec: None, rules, schema }
}

impl Case {
    fn named(mut self, object_name: String) -> Self {
        self.object_name = Some(object_name);
        self
    }
}

fn update(
    name: &'static str,
    kind: AdmittedKind,
    old_spec: Value,
    spec: Value,
    rules: (Verdict, &'static str),
    schema: Verdict,
) -> Case {
    Case { name, kind, spec, object_name: None, old_spec: Some(old_spec), rules, schema }
}

const OK: (Verdict, &str) = (Accept, "");

fn seed_envoy_spec() -> Value {
    json!({"name": "webserver-beta", "configMapName": "envoy-cfg-1", "replicas": 3,
           "xds": {"name": "xds_cluster", "host": "xds-service.default", "port": 19000}})
}

fn envoy_with(patch: Value) -> Value {
    let mut spec = seed_envoy_spec();
    json_patch::merge(&mut spec, &patch);
    spec
}

fn ports(n: usize) -> Value {
    Value::Array((0..n).map(|i| json!({"name": format!("p{i}"), "port": 10000 + i})).collect())
}

/// A route attached to the usual Envoy with one rule.
fn route_rule(rule: Value) -> Value {
    json!({"parentRefs": [{"name": "edge-envoy"}], "rules": [rule]})
}

/// A rule with one match and a backend.
fn route_match(route_match: Value) -> Value {
    route_rule(json!({"matches": [route_match], "backendRefs": [{"name": "web", "port": 80}]}))
}

/// A rule with one filter (and a backend unless it is a redirect).
fn route_filter(filter: Value) -> Value {
    if filter["type"] == "RequestRedirect" {
        route_rule(json!({"filters": [filter]}))
    } else {
        route_rule(json!({"filters": [filter], "backendRefs": [{"name": "web", "port": 80}]}))
    }
}

fn route_backend(backend: Value) -> Value {
    route_rule(json!({"backendRefs": [backend]}))
}

fn header_modifier(modifier: Value) -> Value {
    route_filter(json!({"type": "RequestHeaderModifier", "requestHeaderModifier": modifier}))
}

fn many(n: usize, item: impl Fn(usize) -> Value) -> Value {
    Value::Array((0..n).map(item).collect())
}

fn full_route_spec() -> Value {
    json!({
        "parentRefs": [{"name": "edge-envoy", "sectionName": "http"}, {"name": "edge-envoy", "sectionName": "https"}, {"name": "other-envoy"}],
        "hostnames": ["shop.example.com", "*.shop.example.com"],
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "method": "POST",
                         "headers": [{"name": "x-env", "value": "canary"}, {"type": "RegularExpression", "name": "x-version", "value": "v[0-9]+"}],
                         "queryParams": [{"name": "debug", "value": "1"}]}],
            "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "add": [{"name": "x-b", "value": "two words"}], "remove": ["x-c"]}},
                {"type": "URLRewrite", "urlRewrite": {"hostname": "api.internal", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}}
            ],
            "backendRefs": [{"name": "web", "port": 80, "weight": 90}, {"kind": "Service", "group": "", "name": "web-canary", "port": 8080, "weight": 10}],
            "timeouts": {"request": "1m30s"}
        }, {
            "matches": [{"path": {"type": "Exact", "value": "/old"}}, {"path": {"type": "RegularExpression", "value": "^/legacy/.*$"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "hostname": "shop.example.com", "port": 8443, "statusCode": 301, "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}}}]
        }]
    })
}

fn cases() -> Vec<Case> {
    let mut cases = foo_and_envoy_cases();
    cases.extend(route_cases());
    cases
}

fn route_cases() -> Vec<Case> {
    use AdmittedKind::EnvoyRoute as Route;
    let backend = || json!([{"name": "web", "port": 80}]);
    let prefix_rewrite = json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}});
    vec![
        case("route full", Route, full_route_spec(), OK, Accept),
        case("route empty spec is defaulted", Route, json!({}), OK, Accept),
        case("route without a spec is defaulted", Route, Value::Null, OK, Accept),
        case("route one backend", Route, route_rule(json!({"backendRefs": backend()})), OK, Accept),
        case("route without backends answers 500", Route, route_rule(json!({})), OK, Accept),
        case(
            "route weight 0 backends",
            Route,
            route_backend(json!({"name": "web", "port": 80, "weight": 0})),
            OK,
            Accept,
        ),
        case(
            "route max weight",
            Route,
            route_backend(json!({"name": "web", "port": 80, "weight": 1_000_000})),
            OK,
            Accept,
        ),
        case(
            "route non-Service backend without port is a warning",
            Route,
            route_backend(json!({"kind": "Pod", "name": "web"})),
            OK,
            Accept,
        ),
        case(
            "route 32 parents",
            Route,
            json!({"parentRefs": many(32, |i| json!({"name": format!("e{i}")}))}),
            OK,
            Accept,
        ),
        case(
            "route 128 matches in all",
            Route,
            json!({"rules": many(2, |_| json!({"matches": many(64, |j| json!({"path": {"value": format!("/p{j}")}})), "backendRefs": [{"name": "web", "port": 80}]}))}),
            OK,
            Accept,
        ),
        case(
            "route zero timeout",
            Route,
            route_rule(json!({"backendRefs": backend(), "timeouts": {"request": "0s"}})),
            OK,
            Accept,
        ),
        case(
            "route prefix rewrite with the default match",
            Route,
            route_filter(prefix_rewrite.clone()),
            OK,
            Accept,
        ),
        case(
            "route prefix rewrite to nothing",
            Route,
            route_filter(
                json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": ""}}}),
            ),
            OK,
            Accept,
        ),
        case(
            "route path regex",
            Route,
            route_match(json!({"path": {"type": "RegularExpression", "value": "/api/v[0-9]+/.*"}})),
            OK,
            Accept,
        ),
        case(
            "route parent name uppercase",
            Route,
            json!({"parentRefs": [{"name": "Edge"}]}),
            (Reject, "spec.parentRefs[0].name"),
            Reject,
        ),
        case(
            "route parent twice without sections",
            Route,
            json!({"parentRefs": [{"name": "e"}, {"name": "e"}]}),
            (Reject, "spec.parentRefs[1]"),
            Reject,
        ),
        case(
            "route parent with and without section",
            Route,
            json!({"parentRefs": [{"name": "e"}, {"name": "e", "sectionName": "http"}]}),
            (Reject, "spec.parentRefs[1]"),
            Reject,
        ),
        case(
            "route parent section twice",
            Route,
            json!({"parentRefs": [{"name": "e", "sectionName": "http"}, {"name": "e", "sectionName": "http"}]}),
            (Reject, "spec.parentRefs[1]"),
            Reject,
        ),
        case(
            "route 33 parents",
            Route,
            json!({"parentRefs": many(33, |i| json!({"name": format!("e{i}")}))}),
            (Reject, "spec.parentRefs"),
            Reject,
        ),
        // Stricter than the schema: a port name needs a letter (IANA).
        case(
            "route numeric section name",
            Route,
            json!({"parentRefs": [{"name": "e", "sectionName": "8080"}]}),
            (Reject, "spec.parentRefs[0].sectionName"),
            Accept,
        ),
        case(
            "route uppercase hostname",
            Route,
            json!({"hostnames": ["Shop.example.com"]}),
            (Reject, "spec.hostnames[0]"),
            Reject,
        ),
        case(
            "route bare wildcard hostname",
            Route,
            json!({"hostnames": ["*"]}),
            (Reject, "spec.hostnames[0]"),
            Reject,
        ),
        case(
            "route duplicate hostnames",
            Route,
            json!({"hostnames": ["a.example.com", "a.example.com"]}),
            (Reject, "spec.hostnames[1]"),
            Reject,
        ),
        case(
            "route 17 hostnames",
            Route,
            json!({"hostnames": many(17, |i| json!(format!("h{i}.example.com")))}),
            (Reject, "spec.hostnames"),
            Reject,
        ),
        // Stricter than the schema: Gateway API hostnames are never IP addresses.
        case(
            "route IP address hostname",
            Route,
            json!({"hostnames": ["10.0.0.1"]}),
            (Reject, "spec.hostnames[0]"),
            Accept,
        ),
        case(
            "route 17 rules",
            Route,
            json!({"rules": many(17, |_| json!({}))}),
            (Reject, "spec.rules"),
            Reject,
        ),
        case(
            "route 65 matches in a rule",
            Route,
            route_rule(json!({"matches": many(65, |j| json!({"path": {"value": format!("/p{j}")}}))})),
            (Reject, "spec.rules[0].matches"),
            Reject,
        ),
        case(
            "route 192 matches in all",
            Route,
            json!({"rules": many(3, |_| json!({"matches": many(64, |j| json!({"path": {"value": format!("/p{j}")}}))}))}),
            (Reject, "spec.rules"),
            Reject,
        ),
        case(
            "route relative exact path",
            Route,
            route_match(json!({"path": {"type": "Exact", "value": "login"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route relative path of the default type",
            Route,
            route_match(json!({"path": {"value": "login"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route path with double slash",
            Route,
            route_match(json!({"path": {"value": "/a//b"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route path with encoded slash",
            Route,
            route_match(json!({"path": {"value": "/a%2Fb"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route path ending in dot-dot",
            Route,
            route_match(json!({"path": {"type": "Exact", "value": "/a/.."}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route path with a query",
            Route,
            route_match(json!({"path": {"value": "/a?b=c"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route path too long",
            Route,
            route_match(json!({"path": {"value": format!("/{}", "a".repeat(1024))}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Reject,
        ),
        case(
            "route unknown path type",
            Route,
            route_match(json!({"path": {"type": "Prefix", "value": "/"}})),
            (Reject, "spec.rules[0].matches[0].path.type"),
            Reject,
        ),
        // Stricter than the schema: regular expressions must compile.
        case(
            "route broken path regex",
            Route,
            route_match(json!({"path": {"type": "RegularExpression", "value": "/(a"}})),
            (Reject, "spec.rules[0].matches[0].path.value"),
            Accept,
        ),
        case(
            "route pseudo-header match",
            Route,
            route_match(json!({"headers": [{"name": ":method", "value": "GET"}]})),
            (Reject, "spec.rules[0].matches[0].headers[0].name"),
            Reject,
        ),
        case(
            "route header matched twice",
            Route,
            route_match(json!({"headers": [{"name": "x-a", "value": "1"}, {"name": "x-a", "value": "2"}]})),
            (Reject, "spec.rules[0].matches[0].headers[1].name"),
            Reject,
        ),
        // Stricter than the schema: header names compare case-insensitively.
        case(
            "route header matched twice in two cases",
            Route,
            route_match(json!({"headers": [{"name": "x-a", "value": "1"}, {"name": "X-A", "value": "2"}]})),
            (Reject, "spec.rules[0].matches[0].headers[1].name"),
            Accept,
        ),
        case(
            "route empty header value",
            Route,
            route_match(json!({"headers": [{"name": "x-a", "value": ""}]})),
            (Reject, "spec.rules[0].matches[0].headers[0].value"),
            Reject,
        ),
        case(
            "route 17 header matches",
            Route,
            route_match(json!({"headers": many(17, |i| json!({"name": format!("x-{i}"), "value": "1"}))})),
            (Reject, "spec.rules[0].matches[0].headers"),
            Reject,
        ),
        // Stricter than the schema: regular expressions must compile.
        case(
            "route broken header regex",
            Route,
            route_match(json!({"headers": [{"type": "RegularExpression", "name": "x-a", "value": "[a"}]})),
            (Reject, "spec.rules[0].matches[0].headers[0].value"),
            Accept,
        ),
        case(
            "route query parameter matched twice",
            Route,
            route_match(json!({"queryParams": [{"name": "q", "value": "1"}, {"name": "q", "value": "2"}]})),
            (Reject, "spec.rules[0].matches[0].queryParams[1].name"),
            Reject,
        ),
        case(
            "route unknown method",
            Route,
            route_match(json!({"method": "FETCH"})),
            (Reject, "spec.rules[0].matches[0].method"),
            Reject,
        ),
        case(
            "route unknown filter type",
            Route,
            route_filter(json!({"type": "RequestMirror"})),
            (Reject, "spec.rules[0].filters[0].type"),
            Reject,
        ),
        case(
            "route filter type without its field",
            Route,
            route_filter(json!({"type": "URLRewrite", "requestHeaderModifier": {"remove": ["x-a"]}})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier"),
            Reject,
        ),
        case(
            "route filter repeated",
            Route,
            route_rule(
                json!({"filters": [prefix_rewrite.clone(), prefix_rewrite.clone()], "backendRefs": backend()}),
            ),
            (Reject, "spec.rules[0].filters"),
            Reject,
        ),
        case(
            "route redirect and rewrite",
            Route,
            route_rule(
                json!({"filters": [prefix_rewrite.clone(), {"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]}),
            ),
            (Reject, "spec.rules[0].filters"),
            Reject,
        ),
        case(
            "route redirect with backends",
            Route,
            route_rule(
                json!({"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}], "backendRefs": backend()}),
            ),
            (Reject, "spec.rules[0]"),
            Reject,
        ),
        case(
            "route prefix rewrite of an exact match",
            Route,
            route_rule(
                json!({"matches": [{"path": {"type": "Exact", "value": "/a"}}], "filters": [prefix_rewrite.clone()], "backendRefs": backend()}),
            ),
            (Reject, "spec.rules[0].matches"),
            Reject,
        ),
        case(
            "route prefix rewrite of two matches",
            Route,
            route_rule(
                json!({"matches": [{"path": {"value": "/a"}}, {"path": {"value": "/b"}}], "filters": [prefix_rewrite], "backendRefs": backend()}),
            ),
            (Reject, "spec.rules[0].matches"),
            Reject,
        ),
        case(
            "route prefix redirect of a regex match",
            Route,
            route_rule(
                json!({"matches": [{"path": {"type": "RegularExpression", "value": "/a.*"}}], "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}}}]}),
            ),
            (Reject, "spec.rules[0].matches"),
            Reject,
        ),
        case(
            "route path modifier of the other type",
            Route,
            route_filter(
                json!({"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replacePrefixMatch": "/b"}}}),
            ),
            (Reject, "spec.rules[0].filters[0].requestRedirect.path.replaceFullPath"),
            Reject,
        ),
        case(
            "route relative full path",
            Route,
            route_filter(
                json!({"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "new"}}}),
            ),
            (Reject, "spec.rules[0].filters[0].requestRedirect.path.replaceFullPath"),
            Reject,
        ),
        case(
            "route redirect 307",
            Route,
            route_filter(json!({"type": "RequestRedirect", "requestRedirect": {"statusCode": 307}})),
            (Reject, "spec.rules[0].filters[0].requestRedirect.statusCode"),
            Reject,
        ),
        case(
            "route redirect port 0",
            Route,
            route_filter(json!({"type": "RequestRedirect", "requestRedirect": {"port": 0}})),
            (Reject, "spec.rules[0].filters[0].requestRedirect.port"),
            Reject,
        ),
        case(
            "route redirect scheme ftp",
            Route,
            route_filter(json!({"type": "RequestRedirect", "requestRedirect": {"scheme": "ftp"}})),
            (Reject, "spec.rules[0].filters[0].requestRedirect.scheme"),
            Reject,
        ),
        case(
            "route redirect to a wildcard",
            Route,
            route_filter(
                json!({"type": "RequestRedirect", "requestRedirect": {"hostname": "*.example.com"}}),
            ),
            (Reject, "spec.rules[0].filters[0].requestRedirect.hostname"),
            Reject,
        ),
        case(
            "route set Host",
            Route,
            header_modifier(json!({"set": [{"name": "Host", "value": "a"}]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.set[0]"),
            Reject,
        ),
        case(
            "route remove host",
            Route,
            header_modifier(json!({"remove": ["host"]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.remove[0]"),
            Reject,
        ),
        case(
            "route set a header twice",
            Route,
            header_modifier(json!({"set": [{"name": "x-a", "value": "1"}, {"name": "x-a", "value": "2"}]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.set[1]"),
            Reject,
        ),
        case(
            "route remove a header twice",
            Route,
            header_modifier(json!({"remove": ["x-a", "x-a"]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.remove[1]"),
            Reject,
        ),
        case(
            "route header value with a newline",
            Route,
            header_modifier(json!({"add": [{"name": "x-a", "value": "a
b"}]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.add[0].value"),
            Reject,
        ),
        // Stricter than the schema: one action per header name.
        case(
            "route set and remove a header",
            Route,
            header_modifier(json!({"set": [{"name": "x-a", "value": "1"}], "remove": ["X-A"]})),
            (Reject, "spec.rules[0].filters[0].requestHeaderModifier.remove[0]"),
            Accept,
        ),
        case(
            "route backend without port",
            Route,
            route_backend(json!({"name": "web"})),
            (Reject, "spec.rules[0].backendRefs[0].port"),
            Reject,
        ),
        case(
            "route backend port 70000",
            Route,
            route_backend(json!({"name": "web", "port": 70000})),
            (Reject, "spec.rules[0].backendRefs[0].port"),
            Reject,
        ),
        case(
            "route negative weight",
            Route,
            route_backend(json!({"name": "web", "port": 80, "weight": -1})),
            (Reject, "spec.rules[0].backendRefs[0].weight"),
            Reject,
        ),
        case(
            "route weight above a million",
            Route,
            route_backend(json!({"name": "web", "port": 80, "weight": 1_000_001})),
            (Reject, "spec.rules[0].backendRefs[0].weight"),
            Reject,
        ),
        case(
            "route uppercase backend",
            Route,
            route_backend(json!({"name": "Web", "port": 80})),
            (Reject, "spec.rules[0].backendRefs[0].name"),
            Reject,
        ),
        case(
            "route backend kind with a slash",
            Route,
            route_backend(json!({"kind": "a/b", "name": "web", "port": 80})),
            (Reject, "spec.rules[0].backendRefs[0].kind"),
            Reject,
        ),
        case(
            "route 17 backends",
            Route,
            route_rule(json!({"backendRefs": many(17, |i| json!({"name": format!("web-{i}"), "port": 80}))})),
            (Reject, "spec.rules[0].backendRefs"),
            Reject,
        ),
        case(
            "route fractional timeout",
            Route,
            route_rule(json!({"backendRefs": backend(), "timeouts": {"request": "1.5s"}})),
            (Reject, "spec.rules[0].timeouts.request"),
            Reject,
        ),
        case(
            "route timeout of days",
            Route,
            route_rule(json!({"backendRefs": backend(), "timeouts": {"request": "2d"}})),
            (Reject, "spec.rules[0].timeouts.request"),
            Reject,
        ),
        update(
            "route changes freely",
            Route,
            full_route_spec(),
            route_rule(json!({"backendRefs": backend()})),
            OK,
            Accept,
        ),
    ]
}

fn foo_and_envoy_cases() -> Vec<Case> {
    use AdmittedKind::{Envoy, Foo};
    vec![
        case("foo seed", Foo, json!({"deploymentName": "example-foo", "replicas": 1}), OK, Accept),
        case("foo empty spec is defaulted", Foo, json!({}), OK, Accept),
        case("foo without a spec is defaulted", Foo, Value::Null, OK, Accept),
        case("foo 63-character name", Foo, json!({}), OK, Accept).named("f".repeat(63)),
        case("foo 64-character name", Foo, json!({}), (Reject, "metadata.name"), Reject)
            .named("f".repeat(64)),
        case("foo zero replicas", Foo, json!({"replicas": 0}), OK, Accept),
        case("foo max replicas", Foo, json!({"replicas": 1000}), OK, Accept),
        case("foo negative replicas", Foo, json!({"replicas": -1}), (Reject, "spec.replicas"), Reject),
        case("foo too many replicas", Foo, json!({"replicas": 1001}), (Reject, "spec.replicas"), Reject),
        case(
            "foo replicas not a number",
            Foo,
            json!({"replicas": "three"}),
            (Reject, "spec.replicas"),
            Reject,
        ),
        case("foo replicas fractional", Foo, json!({"replicas": 1.5}), (Reject, "spec.replicas"), Reject),
        case("foo dotted deployment name", Foo, json!({"deploymentName": "web.v2"}), OK, Accept),
        case(
            "foo uppercase deployment name",
            Foo,
            json!({"deploymentName": "Web"}),
            (Reject, "spec.deploymentName"),
            Reject,
        ),
        case(
            "foo underscore deployment name",
            Foo,
            json!({"deploymentName": "web_1"}),
            (Reject, "spec.deploymentName"),
            Reject,
        ),
        case(
            "foo empty deployment name",
            Foo,
            json!({"deploymentName": ""}),
            (Reject, "spec.deploymentName"),
            Reject,
        ),
        case(
            "foo 254-char deployment name",
            Foo,
            json!({"deploymentName": "a".repeat(254)}),
            (Reject, "spec.deploymentName"),
            Reject,
        ),
        update(
            "foo rename is allowed",
            Foo,
            json!({"deploymentName": "a"}),
            json!({"deploymentName": "b"}),
            OK,
            Accept,
        ),
        case("envoy seed", Envoy, seed_envoy_spec(), OK, Accept),
        case("envoy empty spec is defaulted", Envoy, json!({}), OK, Accept),
        case("envoy without a spec is defaulted", Envoy, Value::Null, OK, Accept),
        case("envoy 64-character name", Envoy, seed_envoy_spec(), (Reject, "metadata.name"), Reject)
            .named("e".repeat(64)),
        case(
            "envoy resource claims",
            Envoy,
            envoy_with(json!({"resources": {"claims": [{"name": "gpu"}]}})),
            (Reject, "spec.resources.claims"),
            Reject,
        ),
        case("envoy ipv4 xds host", Envoy, envoy_with(json!({"xds": {"host": "10.0.0.7"}})), OK, Accept),
        case("envoy ipv6 xds host", Envoy, envoy_with(json!({"xds": {"host": "fd00::7"}})), OK, Accept),
        case(
            "envoy xds port 70000",
            Envoy,
            envoy_with(json!({"xds": {"port": 70000}})),
            (Reject, "spec.xds.port"),
            Reject,
        ),
        case(
            "envoy xds port 0",
            Envoy,
            envoy_with(json!({"xds": {"port": 0}})),
            (Reject, "spec.xds.port"),
            Reject,
        ),
        case(
            "envoy xds host with space",
            Envoy,
            envoy_with(json!({"xds": {"host": "xds service"}})),
            (Reject, "spec.xds.host"),
            Reject,
        ),
        case(
            "envoy xds host with scheme",
            Envoy,
            envoy_with(json!({"xds": {"host": "http://xds"}})),
            (Reject, "spec.xds.host"),
            Reject,
        ),
        case(
            "envoy xds host missing",
            Envoy,
            json!({"xds": {"port": 19000}}),
            (Reject, "spec.xds.host"),
            Reject,
        ),
        case(
            "envoy xds cluster name empty",
            Envoy,
            envoy_with(json!({"xds": {"name": ""}})),
            (Reject, "spec.xds.name"),
            Reject,
        ),
        case(
            "envoy xds cluster name with space",
            Envoy,
            envoy_with(json!({"xds": {"name": "xds cluster"}})),
            (Reject, "spec.xds.name"),
            Reject,
        ),
        case("envoy without xds", Envoy, json!({"replicas": 2}), OK, Accept),
        case(
            "envoy name too long for a Service",
            Envoy,
            envoy_with(json!({"name": "a".repeat(64)})),
            (Reject, "spec.name"),
            Reject,
        ),
        case("envoy dotted name", Envoy, envoy_with(json!({"name": "a.b"})), (Reject, "spec.name"), Reject),
        case(
            "envoy uppercase configmap name",
            Envoy,
            envoy_with(json!({"configMapName": "Cfg"})),
            (Reject, "spec.configMapName"),
            Reject,
        ),
        case(
            "envoy negative replicas",
            Envoy,
            envoy_with(json!({"replicas": -3})),
            (Reject, "spec.replicas"),
            Reject,
        ),
        case(
            "envoy pinned image",
            Envoy,
            envoy_with(json!({"image": "registry.local:5000/envoy:v1.34.1"})),
            OK,
            Accept,
        ),
        case(
            "envoy unpinned image is a warning",
            Envoy,
            envoy_with(json!({"image": "envoyproxy/envoy"})),
            OK,
            Accept,
        ),
        case(
            "envoy uppercase image",
            Envoy,
            envoy_with(json!({"image": "Envoy:1"})),
            (Reject, "spec.image"),
            Reject,
        ),
        case(
            "envoy image with empty tag",
            Envoy,
            envoy_with(json!({"image": "envoy:"})),
            (Reject, "spec.image"),
            Reject,
        ),
        case(
            "envoy two ports",
            Envoy,
            envoy_with(
                json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "https", "port": 443, "targetPort": 8443}]}),
            ),
            OK,
            Accept,
        ),
        case(
            "envoy duplicate port names",
            Envoy,
            envoy_with(json!({"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]})),
            (Reject, "spec.ports[1].name"),
            Reject,
        ),
        case(
            "envoy duplicate port numbers",
            Envoy,
            envoy_with(json!({"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]})),
            (Reject, "spec.ports[1].port"),
            Reject,
        ),
        case(
            "envoy listener on the admin port",
            Envoy,
            envoy_with(json!({"ports": [{"name": "admin", "port": 9901}]})),
            (Reject, "spec.ports[0].port"),
            Reject,
        ),
        case(
            "envoy listener on the readiness port",
            Envoy,
            envoy_with(json!({"ports": [{"name": "web", "port": 80, "targetPort": 9902}]})),
            (Reject, "spec.ports[0].targetPort"),
            Reject,
        ),
        case(
            "envoy port out of range",
            Envoy,
            envoy_with(json!({"ports": [{"name": "web", "port": 65536}]})),
            (Reject, "spec.ports[0].port"),
            Reject,
        ),
        case(
            "envoy uppercase port name",
            Envoy,
            envoy_with(json!({"ports": [{"name": "HTTP", "port": 80}]})),
            (Reject, "spec.ports[0].name"),
            Reject,
        ),
        // Stricter than the schema: IANA names need a letter (the schema's pattern does not say).
        case(
            "envoy numeric port name",
            Envoy,
            envoy_with(json!({"ports": [{"name": "8080", "port": 80}]})),
            (Reject, "spec.ports[0].name"),
            Accept,
        ),
        // Stricter than the schema: the container's readiness port has this name.
        case(
            "envoy port named like the readiness port",
            Envoy,
            envoy_with(json!({"ports": [{"name": "envoy-ready", "port": 80}]})),
            (Reject, "spec.ports[0].name"),
            Accept,
        ),
        case("envoy sixteen ports", Envoy, envoy_with(json!({"ports": ports(16)})), OK, Accept),
        case(
            "envoy seventeen ports",
            Envoy,
            envoy_with(json!({"ports": ports(17)})),
            (Reject, "spec.ports"),
            Reject,
        ),
        case(
            "envoy unknown service type",
            Envoy,
            envoy_with(json!({"serviceType": "Ingress"})),
            (Reject, "spec.serviceType"),
            Reject,
        ),
        case("envoy load balancer", Envoy, envoy_with(json!({"serviceType": "LoadBalancer"})), OK, Accept),
        case(
            "envoy resources",
            Envoy,
            envoy_with(
                json!({"resources": {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": 1, "memory": "1Gi"}}}),
            ),
            OK,
            Accept,
        ),
        // Stricter than the schema: quantities are parsed and compared.
        case(
            "envoy request above limit",
            Envoy,
            envoy_with(json!({"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}})),
            (Reject, "spec.resources.requests[memory]"),
            Accept,
        ),
        case(
            "envoy malformed quantity",
            Envoy,
            envoy_with(json!({"resources": {"requests": {"cpu": "lots"}}})),
            (Reject, "spec.resources.requests[cpu]"),
            Accept,
        ),
        update(
            "envoy name is immutable",
            Envoy,
            seed_envoy_spec(),
            envoy_with(json!({"name": "webserver-gamma"})),
            (Reject, "spec.name"),
            Reject,
        ),
        update(
            "envoy configmap rename is allowed",
            Envoy,
            seed_envoy_spec(),
            envoy_with(json!({"configMapName": "envoy-cfg-2"})),
            OK,
            Accept,
        ),
        update(
            "envoy xds change is allowed",
            Envoy,
            seed_envoy_spec(),
            envoy_with(json!({"xds": {"port": 19001}})),
            OK,
            Accept,
        ),
        update("envoy scale down", Envoy, seed_envoy_spec(), envoy_with(json!({"replicas": 1})), OK, Accept),
    ]
}

fn object(kind: AdmittedKind, spec: &Value) -> Value {
    named_object(kind, spec, None)
}

fn named_object(kind: AdmittedKind, spec: &Value, name: Option<&str>) -> Value {
    let usual = match kind {
        AdmittedKind::Foo => "example-foo",
        AdmittedKind::Envoy => "edge-envoy",
        AdmittedKind::EnvoyRoute => "shop-route",
    };
    let mut object = json!({"apiVersion": kind.api_version(), "kind": kind.kind(),
           "metadata": {"name": name.unwrap_or(usual), "namespace": "shop"}, "spec": spec});
    if spec.is_null() {
        object.as_object_mut().expect("an object").remove("spec");
    }
    object
}

/// The generated CustomResourceDefinition of a kind, as JSON.
pub(crate) fn crd_of(kind: AdmittedKind) -> Value {
    let crd = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind.kind())
        .expect("a CRD for every admitted kind");
    serde_json::to_value(crd).expect("CRDs serialize")
}

/// Why the API server would refuse `object` (empty when it would accept): the schema and,
/// for Foos and Envoys, the scale subresource's check of `spec.replicas`.
fn schema_errors(crd: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    envoy_operator_testkit::schema::crd_errors(crd, object, old).iter().map(ToString::to_string).collect()
}

#[test]
fn rule_engine_and_schema_agree() {
    let mut failures = Vec::new();
    for case in cases() {
        let schema = crd_of(case.kind);
        let object = named_object(case.kind, &case.spec, case.object_name.as_deref());
        let old = case.old_spec.as_ref().map(|spec| object_for_old(case.kind, spec));

        let admission = case.kind.admit(&object, old.as_ref());
        let rules_verdict = if admission.is_allowed() { Accept } else { Reject };
        let schema_raw = schema_errors(&schema, &object, old.as_ref());
        let schema_verdict = if schema_raw.is_empty() { Accept } else { Reject };

        if rules_verdict != case.rules.0 {
            failures
                .push(format!("{}: rule engine says {rules_verdict:?}: {:?}", case.name, admission.verdict));
        }
        if let Err(errors) = &admission.verdict
            && errors.0.first().map(|e| e.path.as_str()) != Some(case.rules.1)
        {
            failures
                .push(format!("{}: expected the first error at {}, got {errors}", case.name, case.rules.1));
        }
        if schema_verdict != case.schema {
            failures.push(format!("{}: schema says {schema_verdict:?}: {schema_raw:?}", case.name));
        }
        if schema_verdict == Reject && rules_verdict == Accept {
            failures.push(format!(
                "{}: the rule engine accepts what the schema rejects: {schema_raw:?}",
                case.name
            ));
        }
        if rules_verdict == Accept {
            let after_defaults = schema_errors(&schema, &admission.defaulted, old.as_ref());
            if !after_defaults.is_empty() {
                failures.push(format!(
                    "{}: the defaulted object fails the schema: {after_defaults:?}",
                    case.name
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}

/// Old objects are stored objects: already defaulted by the webhook.
fn object_for_old(kind: AdmittedKind, spec: &Value) -> Value {
    kind.admit(&object(kind, spec), None).defaulted
}

#[test]
fn the_table_exercises_both_sides() {
    let cases = cases();
    let count = |rules: Verdict, schema: Verdict| {
        cases.iter().filter(|c| c.rules.0 == rules && c.schema == schema).count()
    };
    assert!(count(Reject, Reject) >= 20, "many cases must be rejected by both");
    let routes = |rules: Verdict, schema: Verdict| {
        cases
            .iter()
            .filter(|c| c.kind == AdmittedKind::EnvoyRoute && c.rules.0 == rules && c.schema == schema)
            .count()
    };
    assert!(routes(Reject, Reject) >= 40 && routes(Accept, Accept) >= 10, "EnvoyRoutes are covered as well");
    assert!(count(Accept, Accept) >= 10, "many cases must be accepted by both");
    assert!(count(Reject, Accept) >= 1, "the table must show where the webhook is stricter");
    assert_eq!(count(Accept, Reject), 0, "no case may expect the schema to be stricter");
}
