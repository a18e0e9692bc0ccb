//! The rules the Gateway API's CustomResourceDefinitions (standard channel, v1.3 and v1.4;
//! `config/crd/standard/gateway.networking.k8s.io_*.yaml`) set on the `status` the operator
//! writes, written out again here as an `openAPIV3Schema` so that the in-memory API server
//! refuses a status a real one would (see [`crate::fake_api::FakeApi::install_gateway_api`]).
//! Only `status` is constrained; `spec` is taken as it comes (the tests' objects are the
//! upstream suite's, and a real API server defaults them first).
//!
//! Not a copy of the CRDs: no descriptions, no `spec`, no other versions; each rule below is
//! one the CRDs state for the field of that name.

use serde_json::{Value, json};

const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const GROUP: &str = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
const KIND: &str = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$";
const CONTROLLER_NAME: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$";
const ADDRESS_TYPE: &str = r"^Hostname|IPAddress|NamedAddress|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$";

/// `metav1.Condition`, as every Gateway API status list of conditions holds them: at most
/// `max` of them, one per type.
fn conditions(min: u64, max: u64) -> Value {
    json!({
        "type": "array", "minItems": min, "maxItems": max,
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {"type": "string", "format": "date-time"},
                "message": {"type": "string", "maxLength": 32768},
                "observedGeneration": {"type": "integer", "minimum": 0},
                "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                           "pattern": r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                "type": {"type": "string", "maxLength": 316,
                         "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"}
            }
        }
    })
}

/// An object whose `status` has these `properties`, and whose spec is anything.
fn with_status(status: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": status
        }
    })
}

/// `GatewayClassStatus`.
pub fn gateway_class() -> Value {
    with_status(json!({
        "type": "object",
        "properties": {
            "conditions": conditions(0, 8),
            "supportedFeatures": {
                "type": "array", "maxItems": 64,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}
            }
        }
    }))
}

/// `GatewayStatus`: addresses (an `IPAddress` is an IPv4 or IPv6 address, a `Hostname` a DNS
/// name), conditions, and one entry per listener.
pub fn gateway() -> Value {
    let hostname = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
    with_status(json!({
        "type": "object",
        "properties": {
            "addresses": {
                "type": "array", "maxItems": 16, "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["value"],
                    "properties": {
                        "type": {"type": "string", "minLength": 1, "maxLength": 253, "pattern": ADDRESS_TYPE},
                        "value": {"type": "string", "minLength": 1, "maxLength": 253}
                    },
                    "oneOf": [
                        {"properties": {"type": {"enum": ["IPAddress"]},
                                        "value": {"anyOf": [{"format": "ipv4"}, {"format": "ipv6"}]}}},
                        {"properties": {"type": {"not": {"enum": ["IPAddress"]}}}}
                    ],
                    "x-kubernetes-validations": [{
                        "rule": format!("self.type == 'Hostname' ? self.value.matches(r\"\"\"{hostname}\"\"\"): true"),
                        "message": format!("Hostname value must only contain valid characters (matching {hostname})")
                    }]
                }
            },
            "conditions": conditions(0, 8),
            "listeners": {
                "type": "array", "maxItems": 64,
                "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["attachedRoutes", "conditions", "name"],
                    "properties": {
                        "attachedRoutes": {"type": "integer", "minimum": -2147483648_i64, "maximum": 2147483647},
                        "conditions": conditions(0, 8),
                        "name": {"type": "string", "minLength": 1, "maxLength": 253, "pattern": DNS_SUBDOMAIN},
                        "supportedKinds": {
                            "type": "array", "maxItems": 8, "x-kubernetes-list-type": "atomic",
                            "items": {
                                "type": "object",
                                "required": ["kind"],
                                "properties": {
                                    "group": {"type": "string", "maxLength": 253, "pattern": GROUP},
                                    "kind": {"type": "string", "minLength": 1, "maxLength": 63, "pattern": KIND}
                                }
                            }
                        }
                    }
                }
            }
        }
    }))
}

/// `HTTPRouteStatus`: `parents`, each naming its parent and its controller, with at least one
/// condition.
/// TLSRoute's (`v1alpha2`): Gateway API's `RouteStatus`, the same as HTTPRoute's.
pub fn tls_route() -> Value {
    http_route()
}

pub fn http_route() -> Value {
    with_status(json!({
        "type": "object",
        "required": ["parents"],
        "properties": {
            "parents": {
                "type": "array", "maxItems": 32, "x-kubernetes-list-type": "atomic",
                "items": {
                    "type": "object",
                    "required": ["controllerName", "parentRef"],
                    "properties": {
                        "conditions": conditions(1, 8),
                        "controllerName": {"type": "string", "minLength": 1, "maxLength": 253,
                                           "pattern": CONTROLLER_NAME},
                        "parentRef": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "group": {"type": "string", "maxLength": 253, "pattern": GROUP},
                                "kind": {"type": "string", "minLength": 1, "maxLength": 63, "pattern": KIND},
                                "name": {"type": "string", "minLength": 1, "maxLength": 253},
                                "namespace": {"type": "string", "minLength": 1, "maxLength": 63,
                                              "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                                "sectionName": {"type": "string", "minLength": 1, "maxLength": 253,
                                                "pattern": DNS_SUBDOMAIN}
                            }
                        }
                    }
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::errors;

    fn condition(type_: &str, reason: &str) -> Value {
        json!({"type": type_, "status": "True", "reason": reason, "message": "",
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
    }

    fn gateway_with(status: Value) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "edge"}, "spec": {"gatewayClassName": "x"}, "status": status})
    }

    #[test]
    fn a_gateway_status_as_the_operator_writes_it_is_valid() {
        let status = json!({
            "addresses": [{"type": "IPAddress", "value": "10.96.0.7"}, {"type": "Hostname", "value": "lb.example.com"}],
            "conditions": [condition("Accepted", "Accepted"), condition("Programmed", "Programmed")],
            "listeners": [{"name": "http", "attachedRoutes": 1, "conditions": [condition("Accepted", "Accepted")],
                           "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}]}]
        });
        assert_eq!(errors(&gateway(), &gateway_with(status), None), Vec::<String>::new());
    }

    #[test]
    fn what_the_crds_refuse_in_a_gateway_status_is_refused() {
        let time = "lastTransitionTime";
        let refused = [
            ("oneOf", json!({"addresses": [{"type": "IPAddress", "value": "lb.example.com"}]})),
            ("Hostname value must only", json!({"addresses": [{"type": "Hostname", "value": "Not A Name"}]})),
            ("does not match", json!({"conditions": [condition("Accepted", "Not accepted")]})),
            (
                "Duplicate value",
                json!({"conditions": [condition("Accepted", "A"), condition("Accepted", "B")]}),
            ),
            (
                "is a required property",
                json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "A", "message": ""}]}),
            ),
            (
                "is not a \"date-time\"",
                json!({"conditions": [{"type": "Accepted", "status": "True", "reason": "A", "message": "", time: "yesterday"}]}),
            ),
            (
                "\"conditions\" is a required property",
                json!({"listeners": [{"name": "http", "attachedRoutes": 0}]}),
            ),
            (
                "Duplicate value",
                json!({"listeners": [{"name": "http", "attachedRoutes": 0, "conditions": []},
                                                     {"name": "http", "attachedRoutes": 0, "conditions": []}]}),
            ),
        ];
        for (why, status) in refused {
            let errors = errors(&gateway(), &gateway_with(status.clone()), None);
            assert!(
                errors.iter().any(|e| e.contains(why)),
                "{status} is not refused for {why:?}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_route_parent_needs_a_condition_and_a_controller_name_with_a_path() {
        let route = |parent: Value| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "r"},
                   "spec": {}, "status": {"parents": [parent]}})
        };
        let good = json!({"parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
                          "controllerName": "example.com/envoy-operator", "conditions": [condition("Accepted", "Accepted")]});
        assert_eq!(errors(&http_route(), &route(good.clone()), None), Vec::<String>::new());
        let mut no_conditions = good.clone();
        no_conditions["conditions"] = json!([]);
        assert!(!errors(&http_route(), &route(no_conditions), None).is_empty());
        let mut bare_controller = good;
        bare_controller["controllerName"] = json!("envoy-operator");
        assert!(!errors(&http_route(), &route(bare_controller), None).is_empty());
    }
}
