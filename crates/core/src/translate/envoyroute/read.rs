//! The EnvoyRoute door: an EnvoyRoute read once into the route model, defaulted and judged by
//! the rule engine (it may have been stored while the webhook was down), its backends resolved
//! among the Services of its namespace.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use crate::api::EnvoyRoute;
use crate::api::route::ParentReference;
use crate::fleet::isolate::Rejections;
use crate::route::{self, Route, backend, status};
use crate::rules::{Rules, defaulted};

/// An EnvoyRoute and its model: the parentRefs are the door's (they name Envoys).
#[derive(Clone, Debug)]
pub struct ReadEnvoyRoute<'a> {
    pub object: &'a EnvoyRoute,
    pub route: Route,
}

impl<'a> ReadEnvoyRoute<'a> {
    /// Reads `object`: `rejected` says which versions of which routes the proxies refused.
    pub fn read(object: &'a EnvoyRoute, services: &[Arc<Service>], rejected: &Rejections) -> Self {
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let name = object.metadata.name.clone().unwrap_or_default();
        let defaulted = defaulted(object.clone());
        // The rule engine's verdict first: a refusal by the proxies is about a valid route.
        let refused = match defaulted.validate(None) {
            Err(errors) => Some(errors.message("EnvoyRoute", &name)),
            Ok(_) => rejected.of("EnvoyRoute", &object.metadata).map(|r| r.condition_message()),
        };
        let effective = defaulted.effective();
        let mut unresolved = Vec::new();
        let rules = effective
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let backends: Vec<_> = rule
                    .backend_refs
                    .iter()
                    .enumerate()
                    .map(|(k, reference)| {
                        let resolved = backend::resolve(&namespace, reference, services);
                        if let Err(why) = &resolved {
                            unresolved.push((format!("spec.rules[{i}].backendRefs[{k}]"), why.clone()));
                        }
                        resolved
                    })
                    .collect();
                route::rule(rule, backends, Default::default(), Vec::new())
            })
            .collect();
        let route = Route {
            kind: "EnvoyRoute",
            namespace,
            name,
            created: object.metadata.creation_timestamp.as_ref().map(|time| time.0),
            hostnames: effective.hostnames.clone(),
            rules,
            refused,
            resolved_refs: status::resolved_refs(&unresolved),
        };
        Self { object, route }
    }

    /// The distinct parentRefs, sorted.
    pub fn parent_refs(&self) -> Vec<&ParentReference> {
        let mut parent_refs: Vec<&ParentReference> = self.object.spec.parent_refs.iter().collect();
        parent_refs.sort();
        parent_refs.dedup();
        parent_refs
    }
}
