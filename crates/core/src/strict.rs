//! Strict field validation: the fields `kubectl apply` refuses as unknown (its default,
//! `--validate=strict`, has the API server decode strictly), in the API server's words:
//! `HTTPRoute in version "v1" cannot be handled as a HTTPRoute: strict decoding error: unknown
//! field "spec.rules[0].backendRef"`. One rule for every offline command (`check`, `render`,
//! `render --xds`), so a typo is refused where the cluster would refuse it, not served as if
//! the field were absent.
//!
//! Foo, Envoy and EnvoyRoute are judged by their own types, from which their CRDs are
//! generated; the Gateway API kinds the operator reads by the fields their CRDs declare
//! ([`gateway_api`]). `metadata` and `status` are the API server's and never judged; other
//! kinds are not judged at all.

mod gateway_api;

use serde_json::Value;

use crate::bounded;
use crate::kind::AdmittedKind;
use crate::manifest::{Outcome, type_meta};

/// Unknown fields named in one refusal; more are counted.
pub const MAX_LISTED_FIELDS: usize = 16;

/// The fields of a schema, as strict decoding knows them.
#[derive(Clone, Copy, Debug)]
pub enum Fields {
    /// A scalar, a map with keys of the user's choosing (labels, annotations), or a field
    /// whose content is not judged.
    Any,
    /// An object with these fields and no others.
    Object(&'static [(&'static str, Fields)]),
    /// A list of these.
    List(&'static Fields),
}

/// The unknown fields of `object` (paths as the API server writes them,
/// `spec.rules[0].backendRef`, in document order), or `None` when its kind is not judged.
pub fn unknown_fields(object: &Value) -> Option<Vec<String>> {
    let (api_version, kind) = type_meta(object).ok()?;
    if let Ok(Some(admitted)) = AdmittedKind::resolve(api_version, kind) {
        return Some(admitted.unknown_fields(object));
    }
    let spec = gateway_api::spec(api_version, kind)?;
    let mut unknown = Vec::new();
    for (key, value) in object.as_object().into_iter().flatten() {
        match key.as_str() {
            "spec" => walk(spec, value, key, &mut unknown),
            "apiVersion" | "kind" | "metadata" | "status" => {}
            _ => unknown.push(key.clone()),
        }
    }
    Some(unknown)
}

/// The API server's refusal of `object` when it has unknown fields.
pub fn refusal(object: &Value) -> Option<String> {
    let unknown = unknown_fields(object).filter(|unknown| !unknown.is_empty())?;
    let (api_version, kind) = type_meta(object).ok()?;
    let version = api_version.rsplit('/').next().unwrap_or(api_version);
    let listed = bounded::capped(
        unknown.iter().map(|path| format!("unknown field \"{}\"", bounded::echo(path))).collect(),
        MAX_LISTED_FIELDS,
        |n| format!("and {n} more unknown fields"),
    );
    Some(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        listed.join(", ")
    ))
}

/// [`refusal`] as an offline command's outcome: `Err` with the refusal, `Ok` when the API
/// server would decode the object.
pub fn check(object: &Value) -> Result<(), Outcome> {
    match refusal(object) {
        Some(message) => Err(Outcome::Rejected { message }),
        None => Ok(()),
    }
}

/// Collects the paths of `value`'s fields that `fields` does not declare. A value of another
/// shape than declared (a string where a list is) is the schema's error, not strict decoding's.
fn walk(fields: Fields, value: &Value, path: &str, unknown: &mut Vec<String>) {
    match (fields, value) {
        (Fields::Object(known), Value::Object(map)) => {
            for (key, value) in map {
                let inner = format!("{path}.{key}");
                match known.iter().find(|(name, _)| name == key) {
                    Some((_, fields)) => walk(*fields, value, &inner, unknown),
                    None => unknown.push(inner),
                }
            }
        }
        (Fields::List(items), Value::Array(values)) => {
            for (index, value) in values.iter().enumerate() {
                walk(*items, value, &format!("{path}[{index}]"), unknown);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn route(rule: Value) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "labels": {"any": "x"}},
            "spec": {"parentRefs": [{"name": "gw", "port": 80}], "rules": [rule]},
            "status": {"parents": []}})
    }

    #[test]
    fn a_typo_in_an_httproute_is_refused_in_the_api_servers_words() {
        let typo = route(json!({"backendRef": [{"name": "web", "port": 80}]}));
        assert_eq!(unknown_fields(&typo), Some(vec!["spec.rules[0].backendRef".to_owned()]));
        assert_eq!(
            refusal(&typo).unwrap(),
            "HTTPRoute in version \"v1\" cannot be handled as a HTTPRoute: strict decoding error: \
             unknown field \"spec.rules[0].backendRef\""
        );
        let right = route(json!({
            "name": "main",
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}, "headers": [{"name": "a", "value": "b"}], "method": "GET"}],
            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "percent": 10}}],
            "backendRefs": [{"name": "web", "port": 80, "weight": 1, "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}], "remove": ["c"]}}
            ]}],
            "timeouts": {"request": "10s", "backendRequest": "5s"}
        }));
        assert_eq!(unknown_fields(&right), Some(Vec::new()));
        assert_eq!(refusal(&right), None);
    }

    #[test]
    fn every_unknown_field_is_named_in_document_order() {
        let typos = route(json!({
            "matches": [{"path": {"type": "Exact", "value": "/", "prefix": true}}],
            "backendRefs": [{"name": "web", "filters": [{"type": "URLRewrite", "urlRewrite": {"hostName": "x"}}]}],
            "sessionPersistence": {}
        }));
        assert_eq!(
            unknown_fields(&typos).unwrap(),
            [
                "spec.rules[0].matches[0].path.prefix",
                "spec.rules[0].backendRefs[0].filters[0].urlRewrite.hostName",
                "spec.rules[0].sessionPersistence"
            ]
        );
    }

    #[test]
    fn every_kind_read_is_judged_and_others_are_not() {
        let gateway = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw"},
            "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP",
                "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}},
                "tls": {"certificateRefs": [{"name": "s"}], "options": {"vendor/x": "y"}}, "hostName": "x"}],
                "infrastructure": {"labels": {"a": "b"}}}});
        assert_eq!(unknown_fields(&gateway).unwrap(), ["spec.listeners[0].hostName"]);
        let class = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "c"}, "spec": {"controllerName": "example.com/x", "parameterRef": {}}});
        assert_eq!(unknown_fields(&class).unwrap(), ["spec.parameterRef"]);
        let grant = json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "g"}, "spec": {"from": [{"group": "", "kind": "HTTPRoute", "namespace": "a"}],
            "to": [{"group": "", "kind": "Service", "namespace": "b"}]}});
        assert_eq!(unknown_fields(&grant).unwrap(), ["spec.to[0].namespace"]);
        let envoy_route = json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "r"}, "spec": {"parentRefs": [{"name": "edge"}],
            "rules": [{"backendRef": [{"name": "web", "port": 80}]}]}});
        assert_eq!(unknown_fields(&envoy_route).unwrap(), ["spec.rules[0].backendRef"]);
        let foo = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "f"}, "spec": {"deploymentName": "f", "replica": 1}});
        assert!(refusal(&foo).unwrap().starts_with("Foo in version \"v1alpha1\" cannot be handled as a Foo"));
        let service =
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"x": 1}});
        assert_eq!(unknown_fields(&service), None);
        let beta =
            json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute", "spec": {"x": 1}});
        assert_eq!(unknown_fields(&beta), None, "a version the operator does not read");
    }

    #[test]
    fn a_refusal_is_bounded() {
        let mut rule = serde_json::Map::new();
        for i in 0..10_000 {
            rule.insert(format!("typo{i}-{}", "k".repeat(1000)), json!(1));
        }
        let message = refusal(&route(Value::Object(rule))).unwrap();
        assert!(message.len() < 4_000, "{}", message.len());
        assert!(message.ends_with("and 9985 more unknown fields"), "{message}");
    }
}
