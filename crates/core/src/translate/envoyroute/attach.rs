//! Attachment: which listeners of an Envoy a route attaches to, by each of its parentRefs, and
//! why not when it does not. A route is first defaulted and validated by the rule engine (it
//! may have been stored while the webhook was down): an invalid route attaches nowhere.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::rule::RuleExtensions;
use crate::api::route::ParentReference;
use crate::api::{Envoy, EnvoyRoute};
use crate::names::REASON_ACCEPTED;
use crate::route::backend::{self, ClusterKey, Unresolved};
use crate::route::conditions::{ConditionState, REASON_NO_MATCHING_PARENT, REASON_UNSUPPORTED_VALUE};
use crate::rules::{Defaulted, FieldErrors, Rules, defaulted};

/// A route read for translation: defaulted, judged by the rule engine, its backends resolved.
#[derive(Clone, Debug)]
pub struct CheckedRoute {
    pub route: Defaulted<EnvoyRoute>,
    /// The rule engine's errors, if any.
    pub invalid: Option<FieldErrors>,
    /// Why the fleet's proxies refused this very version of the route, if they did
    /// ([`crate::fleet::isolate`]): it attaches nowhere until it changes.
    pub rejected: Option<String>,
    /// For each rule, for each of its backendRefs: the Service port it names, or why none.
    pub backends: Vec<Vec<Result<ClusterKey, Unresolved>>>,
    /// For each rule, what an HTTPRoute's rule does that an EnvoyRoute's cannot say (response
    /// header changes, mirrors); empty for an EnvoyRoute.
    pub extensions: Vec<RuleExtensions>,
}

impl CheckedRoute {
    pub fn new(route: &EnvoyRoute, services: &[Arc<Service>]) -> Self {
        let mut checked = Self::with_backends(route, Vec::new());
        let namespace = checked.namespace().to_owned();
        checked.backends = checked
            .route
            .effective()
            .rules
            .iter()
            .map(|rule| rule.backend_refs.iter().map(|b| backend::resolve(&namespace, b, services)).collect())
            .collect();
        checked
    }

    /// A route whose backends were resolved by other rules than an EnvoyRoute's (an HTTPRoute's
    /// may name Services of other namespaces where a ReferenceGrant allows it): `backends` holds,
    /// for each rule, for each of its backendRefs, the Service port or why none.
    pub fn with_backends(route: &EnvoyRoute, backends: Vec<Vec<Result<ClusterKey, Unresolved>>>) -> Self {
        let route = defaulted(route.clone());
        let invalid = route.validate(None).err();
        Self { route, invalid, rejected: None, backends, extensions: Vec::new() }
    }

    pub fn name(&self) -> &str {
        self.route.metadata.name.as_deref().unwrap_or_default()
    }

    pub fn namespace(&self) -> &str {
        self.route.metadata.namespace.as_deref().unwrap_or_default()
    }
}

/// What one parentRef naming `envoy` makes of the route: the `Accepted` condition, and the
/// listeners it attaches the route to (none unless accepted). `envoy` is `None` when the
/// namespace has no Envoy of that name; `listeners` are the names of the Envoy's listeners.
pub fn attach(
    checked: &CheckedRoute,
    parent_ref: &ParentReference,
    envoy: Option<&Defaulted<Envoy>>,
    listeners: &[String],
) -> (ConditionState, Vec<String>) {
    let refused = |reason, message| (ConditionState { status: false, reason, message }, Vec::new());
    if let Some(errors) = &checked.invalid {
        let message = errors.message("EnvoyRoute", checked.name());
        return refused(REASON_UNSUPPORTED_VALUE, message);
    }
    if let Some(message) = &checked.rejected {
        return refused(REASON_UNSUPPORTED_VALUE, message.clone());
    }
    let Some(envoy) = envoy else {
        let message = format!("no Envoy named {:?} in namespace {:?}", parent_ref.name, checked.namespace());
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

    use super::*;
    use crate::api::{EnvoySpec, ServicePort};

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
        let checked = CheckedRoute::new(&route(json!({"parentRefs": [{"name": "edge"}]})), &[]);
        let (accepted, on) = attach(&checked, &parent(None), Some(&envoy()), &listeners());
        assert!(accepted.status);
        assert_eq!(accepted.message, "attached to listeners admin-api, http of Envoy \"edge\"");
        assert_eq!(on, listeners());
        let (accepted, on) = attach(&checked, &parent(Some("http")), Some(&envoy()), &listeners());
        assert_eq!((accepted.reason, on), (REASON_ACCEPTED, vec!["http".to_owned()]));
    }

    #[test]
    fn no_such_envoy_or_port_is_no_matching_parent() {
        let checked = CheckedRoute::new(&route(json!({"parentRefs": [{"name": "edge"}]})), &[]);
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
        let checked = CheckedRoute::new(
            &route(
                json!({"parentRefs": [{"name": "edge"}], "rules": [{"matches": [{"path": {"value": "nope"}}]}]}),
            ),
            &[],
        );
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
