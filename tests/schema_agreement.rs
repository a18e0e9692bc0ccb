//! One table of good and bad objects, run through both the rule engine (what the webhooks
//! and the reconcilers enforce) and the generated CRD schema (what the API server enforces
//! when the webhook is down): OpenAPI keywords with `jsonschema`, list-map keys as the API
//! server checks them, and CEL `x-kubernetes-validations` with `kube-cel`.
//!
//! The invariants: every case gets the verdicts the table expects from each side; the rule
//! engine never accepts what the schema rejects; and what the rule engine accepts, once
//! defaulted, the schema accepts too.

use envoy_operator_core::admission::AdmittedKind;
use envoy_operator_core::crd;
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

fn cases() -> Vec<Case> {
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
    let usual = if kind == AdmittedKind::Foo { "example-foo" } else { "edge-envoy" };
    let mut object = json!({"apiVersion": kind.api_version(), "kind": kind.kind(),
           "metadata": {"name": name.unwrap_or(usual), "namespace": "shop"}, "spec": spec});
    if spec.is_null() {
        object.as_object_mut().expect("an object").remove("spec");
    }
    object
}

/// The generated `openAPIV3Schema` of a kind.
fn schema_of(kind: AdmittedKind) -> Value {
    let crd = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind.kind())
        .expect("a CRD for every admitted kind");
    let schema =
        crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema");
    serde_json::to_value(schema).expect("schema serializes")
}

/// Why the API server would refuse `object` against `schema` (empty when it would accept).
fn schema_errors(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    let validator = jsonschema::validator_for(schema).expect("the schema compiles as JSON Schema");
    let mut errors: Vec<String> =
        validator.iter_errors(object).map(|e| format!("{}: {e}", e.instance_path())).collect();
    errors.extend(list_map_key_errors(schema, object, ""));
    if let Err(cel_errors) = kube_cel::Validator::new().validate(schema, object, old) {
        errors.extend(cel_errors.iter().map(ToString::to_string));
    }
    errors
}

/// The API server's check of `x-kubernetes-list-type: map`: no two items share their keys.
fn list_map_key_errors(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match value {
        Value::Object(fields) => {
            for (key, child) in fields {
                if let Some(child_schema) = schema.get("properties").and_then(|p| p.get(key)) {
                    errors.extend(list_map_key_errors(child_schema, child, &format!("{path}.{key}")));
                }
            }
        }
        Value::Array(items) => {
            if schema.get("x-kubernetes-list-type") == Some(&json!("map")) {
                let keys = schema["x-kubernetes-list-map-keys"].as_array().cloned().unwrap_or_default();
                let mut seen = Vec::new();
                for item in items {
                    let id: Vec<Value> =
                        keys.iter().filter_map(|k| k.as_str()).map(|k| item[k].clone()).collect();
                    if seen.contains(&id) {
                        errors.push(format!("{path}: Duplicate value: {id:?}"));
                    }
                    seen.push(id);
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    errors.extend(list_map_key_errors(item_schema, item, &format!("{path}[{i}]")));
                }
            }
        }
        _ => {}
    }
    errors
}

#[test]
fn rule_engine_and_schema_agree() {
    let mut failures = Vec::new();
    for case in cases() {
        let schema = schema_of(case.kind);
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
    assert!(count(Accept, Accept) >= 10, "many cases must be accepted by both");
    assert!(count(Reject, Accept) >= 1, "the table must show where the webhook is stricter");
    assert_eq!(count(Accept, Reject), 0, "no case may expect the schema to be stricter");
}
