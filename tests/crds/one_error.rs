//! One fault, one error: an object whose only fault is one bad field is refused by the API
//! server with one error, not with a schema keyword and a CEL rule (or two rules, or the scale
//! subresource's check) saying the same thing twice, and the webhook's rule engine refuses it
//! with one error too. The API server is modelled by testkit's `schema::crd_errors`: the
//! schema as kube-openapi reports it, list-map keys, CEL rules, the scale subresource.

use envoy_operator_core::kind::AdmittedKind::{self, Envoy, EnvoyRoute as Route, Foo};
use envoy_operator_testkit::schema::{FieldError, crd_errors};
use serde_json::{Value, json};

use crate::schema_agreement::crd_of;

fn object(kind: AdmittedKind, spec: Value) -> Value {
    json!({"apiVersion": kind.api_version(), "kind": kind.kind(),
           "metadata": {"name": "one-fault", "namespace": "shop"}, "spec": spec})
}

fn route_path(path: Value) -> Value {
    json!({"parentRefs": [{"name": "edge"}],
           "rules": [{"matches": [{"path": path}], "backendRefs": [{"name": "web", "port": 80}]}]})
}

/// Objects with one bad field each: (what, kind, spec, the field the error is about).
fn one_fault_each() -> Vec<(&'static str, AdmittedKind, Value, &'static str)> {
    let ports = |ports: Value| json!({"ports": ports});
    vec![
        ("a negative Foo", Foo, json!({"replicas": -1}), "spec.replicas"),
        ("a Foo over the bound", Foo, json!({"replicas": 1001}), "spec.replicas"),
        ("a negative Envoy", Envoy, json!({"replicas": -3}), "spec.replicas"),
        ("an empty fleet name", Envoy, json!({"name": ""}), "spec.name"),
        ("a fleet name with capitals", Envoy, json!({"name": "Edge"}), "spec.name"),
        ("an xDS port of 0", Envoy, json!({"xds": {"host": "xds.default", "port": 0}}), "spec.xds.port"),
        ("the admin port", Envoy, ports(json!([{"name": "admin", "port": 9901}])), "spec.ports[0]"),
        (
            "a port number twice",
            Envoy,
            ports(json!([{"name": "a", "port": 80}, {"name": "b", "port": 80}])),
            "spec.ports",
        ),
        (
            "resource claims",
            Envoy,
            json!({"resources": {"claims": [{"name": "gpu"}]}}),
            "spec.resources.claims",
        ),
        (
            "a path with a fragment",
            Route,
            route_path(json!({"type": "PathPrefix", "value": "/a#b"})),
            "spec.rules[0].matches[0].path",
        ),
        (
            "an empty path",
            Route,
            route_path(json!({"type": "Exact", "value": ""})),
            "spec.rules[0].matches[0].path",
        ),
        ("a relative path", Route, route_path(json!({"value": "api"})), "spec.rules[0].matches[0].path"),
        (
            "an uppercase hostname",
            Route,
            json!({"parentRefs": [{"name": "edge"}], "hostnames": ["Shop.example.com"]}),
            "spec.hostnames[0]",
        ),
        (
            "a Service without a port",
            Route,
            json!({"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web"}]}]}),
            "spec.rules[0].backendRefs[0]",
        ),
        (
            "an Envoy named twice",
            Route,
            json!({"parentRefs": [{"name": "edge"}, {"name": "edge"}]}),
            "spec.parentRefs",
        ),
    ]
}

/// The field an error is about, without the leading `.` of the scale subresource's paths.
fn field(error: &FieldError) -> &str {
    error.path.trim_start_matches('.')
}

#[test]
fn one_bad_field_is_one_error_from_the_api_server_and_from_the_webhook() {
    let mut failures = Vec::new();
    for (what, kind, spec, at) in one_fault_each() {
        let object = object(kind, spec);
        let errors = crd_errors(&crd_of(kind), &object, None);
        if errors.len() != 1 || field(&errors[0]) != at {
            failures.push(format!("{what}: the API server would say, about {at}: {errors:#?}"));
        }
        match kind.admit(&object, None).verdict {
            Err(rules) if rules.0.len() == 1 => {}
            verdict => failures.push(format!("{what}: the webhook says {verdict:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The scale subresource checks `spec.replicas` whatever the schema says, in Kubernetes' words:
/// the schema leaves the lower bound to it.
#[test]
fn a_negative_replica_count_is_refused_in_the_scale_subresource_words() {
    for kind in [Foo, Envoy] {
        let errors = crd_errors(&crd_of(kind), &object(kind, json!({"replicas": -1})), None);
        let said: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(said, [".spec.replicas: Invalid value: -1: should be a non-negative integer"], "{kind:?}");
    }
}

/// The model counts as the API server does: a string's first failing keyword only, no CEL rule
/// after a blocking error, and the scale subresource's check beside the schema's.
#[test]
fn the_api_server_model_counts_errors_as_the_api_server_does() {
    // An empty name fails `minLength` and `pattern`: kube-openapi reports the first.
    let errors = crd_errors(&crd_of(Envoy), &object(Envoy, json!({"name": ""})), None);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].message.contains("shorter than 1 character"), "{errors:#?}");
    // A wrong type is blocking: CEL rules are not run, the API server says so once.
    let ports = json!({"ports": [{"name": "a", "port": "eighty"}, {"name": "b", "port": 9901}]});
    let errors = crd_errors(&crd_of(Envoy), &object(Envoy, ports), None);
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["spec.ports[0].port", ""], "{errors:#?}");
    // A schema with a lower bound on a scaled field would say it twice.
    let mut foo = crd_of(Foo);
    foo["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
        ["minimum"] = json!(0);
    assert_eq!(crd_errors(&foo, &object(Foo, json!({"replicas": -1})), None).len(), 2);
}
