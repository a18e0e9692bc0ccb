//! Attachment: which listeners of an Envoy a route attaches to, by each of its parentRefs, and
//! why not when it does not. A route the model refuses (invalid, or refused by the proxies)
//! attaches nowhere.

use crate::api::Envoy;
use crate::api::route::ParentReference;
use crate::names::REASON_ACCEPTED;
use crate::route::Route;
use crate::route::conditions::{ConditionState, REASON_NO_MATCHING_PARENT, REASON_UNSUPPORTED_VALUE};
use crate::rules::Defaulted;

/// What one parentRef naming `envoy` makes of the route: the `Accepted` condition, and the
/// listeners it attaches the route to (none unless accepted). `envoy` is `None` when the
/// namespace has no Envoy of that name; `listeners` are the names of the Envoy's listeners.
pub fn attach(
    route: &Route,
    parent_ref: &ParentReference,
    envoy: Option<&Defaulted<Envoy>>,
    listeners: &[String],
) -> (ConditionState, Vec<String>) {
    let refused = |reason, message| (ConditionState { status: false, reason, message }, Vec::new());
    if let Some(message) = &route.refused {
        return refused(REASON_UNSUPPORTED_VALUE, message.clone());
    }
    let Some(envoy) = envoy else {
        let message = format!("no Envoy named {:?} in namespace {:?}", parent_ref.name, route.namespace);
        return refused(REASON_NO_MATCHING_PARENT, message);
    };
    let attached: Vec<String> = match &parent_ref.section_name {
        None => listeners.to_vec(),
        Some(section) => listeners.iter().filter(|name| *name == section).cloned().collect(),
    };
    if attached.is_empty() {
        let ports: Vec<&str> = envoy.effective().ports.iter().map(|p| p.name.as_str()).collect();
        let message = match &parent_ref.section_name {
            Some(section) => format!(
                "Envoy {:?} has no port named {section:?} (its ports: {})",
                parent_ref.name,
                ports.join(", ")
            ),
            None => format!("Envoy {:?} has no listener to attach to", parent_ref.name),
        };
        return refused(REASON_NO_MATCHING_PARENT, message);
    }
    let plural = if attached.len() == 1 { "" } else { "s" };
    let message =
        format!("attached to listener{plural} {} of Envoy {:?}", attached.join(", "), parent_ref.name);
    (ConditionState { status: true, reason: REASON_ACCEPTED, message }, attached)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::super::read::ReadEnvoyRoute;
    use super::*;
    use crate::api::{EnvoyRoute, EnvoySpec, ServicePort};
    use crate::fleet::isolate::Rejections;
    use crate::rules::defaulted;

    fn route(spec: serde_json::Value) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": spec}))
        .unwrap()
    }

    fn envoy() -> Defaulted<Envoy> {
        defaulted(Envoy {
            metadata: ObjectMeta {
                name: Some("edge".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: EnvoySpec {
                ports: vec![
                    ServicePort { name: "http".into(), port: 80, target_port: Some(8080) },
                    ServicePort { name: "admin-api".into(), port: 9000, target_port: None },
                ],
                ..Default::default()
            },
            status: None,
        })
    }

    fn listeners() -> Vec<String> {
        vec!["admin-api".into(), "http".into()]
    }

    fn parent(section: Option<&str>) -> ParentReference {
        ParentReference { name: "edge".into(), section_name: section.map(Into::into) }
    }

    #[test]
    fn a_parent_ref_attaches_to_every_listener_or_its_section() {
        let object = route(json!({"parentRefs": [{"name": "edge"}]}));
        let checked = ReadEnvoyRoute::read(&object, &[], &Rejections::default()).route;
        let (accepted, on) = attach(&checked, &parent(None), Some(&envoy()), &listeners());
        assert!(accepted.status);
        assert_eq!(accepted.message, "attached to listeners admin-api, http of Envoy \"edge\"");
        assert_eq!(on, listeners());
        let (accepted, on) = attach(&checked, &parent(Some("http")), Some(&envoy()), &listeners());
        assert_eq!((accepted.reason, on), (REASON_ACCEPTED, vec!["http".to_owned()]));
    }

    #[test]
    fn no_such_envoy_or_port_is_no_matching_parent() {
        let object = route(json!({"parentRefs": [{"name": "edge"}]}));
        let checked = ReadEnvoyRoute::read(&object, &[], &Rejections::default()).route;
        let (accepted, on) = attach(&checked, &parent(Some("https")), Some(&envoy()), &listeners());
        assert_eq!(accepted.reason, REASON_NO_MATCHING_PARENT);
        assert_eq!(
            accepted.message,
            "Envoy \"edge\" has no port named \"https\" (its ports: http, admin-api)"
        );
        assert!(on.is_empty());
        let (accepted, _) = attach(&checked, &parent(None), None, &listeners());
        assert_eq!(
            (accepted.status, accepted.message.as_str()),
            (false, "no Envoy named \"edge\" in namespace \"shop\"")
        );
    }

    #[test]
    fn an_invalid_route_attaches_nowhere() {
        let object = route(
            json!({"parentRefs": [{"name": "edge"}], "rules": [{"matches": [{"path": {"value": "nope"}}]}]}),
        );
        let checked = ReadEnvoyRoute::read(&object, &[], &Rejections::default()).route;
        let (accepted, on) = attach(&checked, &parent(None), Some(&envoy()), &listeners());
        assert_eq!(accepted.reason, REASON_UNSUPPORTED_VALUE);
        assert!(
            accepted
                .message
                .starts_with("The EnvoyRoute \"shop\" is invalid: spec.rules[0].matches[0].path.value"),
            "{}",
            accepted.message
        );
        assert!(on.is_empty());
    }
}
