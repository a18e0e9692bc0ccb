//! The route model: every route kind read into one neutral, checked form. A front door
//! ([`crate::translate::envoyroute`], [`crate::translate::gateway`]) reads each of its route
//! objects once (defaulted, judged, its backends resolved by that kind's own rules) into a
//! [`Route`]; virtual hosts and the IR read the model and never the object, and a door keeps of
//! its object only what is its kind's own (the parentRefs its attachment judges). GRPCRoute,
//! TLSRoute and mesh routes become one more reader each.
//!
//! - [`backend`]: the Service port a backendRef names, or why none;
//! - [`conditions`]: the conditions a route's parents set, in Gateway API's words;
//! - [`status`]: a route's `status.parents` written from them, for every route kind;
//! - [`events`]: which changes of those conditions are told as Events.

pub mod backend;
pub mod conditions;
pub mod events;
mod read;
pub mod status;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub use self::backend::{ClusterKey, Unresolved};
use self::conditions::ConditionState;
pub use self::read::{header_changes, rule};
use crate::ir;

/// One route object, read: what it matches and does, rule by rule, and whether it can be
/// served at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The object's kind (`EnvoyRoute`, `HTTPRoute`).
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    /// When the object was stored: of two routes equal in every other precedence, the older
    /// wins (Gateway API). None: not stored yet, after every stored route.
    pub created: Option<Timestamp>,
    /// The object's own hostnames (empty: every host); a parent may serve it on fewer.
    pub hostnames: Vec<String>,
    /// Never empty: a route without rules has the default one.
    pub rules: Vec<Rule>,
    /// Why the route is served nowhere, if it is not: invalid, asking for what the operator
    /// does not implement, or refused by the proxies in this very version. Every parent's
    /// `Accepted` says so (`UnsupportedValue`) and the route drops out alone.
    pub refused: Option<String>,
    /// `ResolvedRefs`, the same for every parent: do the backends (and mirrors) resolve?
    pub resolved_refs: ConditionState,
}

/// A rule: its matches (never empty) and what it does with the requests they match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub matches: Vec<Match>,
    pub request_headers: ir::HeaderChanges,
    pub response_headers: ir::HeaderChanges,
    pub action: Action,
}

/// One match: which requests, as the IR says it. Header and query parameter matches hold at
/// most one per name (the first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    pub path: ir::PathMatch,
    pub method: Option<String>,
    pub headers: Vec<ir::ValueMatch>,
    pub query_params: Vec<ir::ValueMatch>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Forward(Forward),
    Redirect(ir::Redirect),
}

/// Forward to the rule's backends by weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Every backendRef of the rule, in its order, resolved or not.
    pub backends: Vec<BackendRef>,
    /// How long a request may take; zero: without a limit. None: the proxy's default.
    pub timeout: Option<Duration>,
    /// How long one attempt to a backend may take; zero: without a limit.
    pub backend_timeout: Option<Duration>,
    pub host_rewrite: Option<String>,
    pub path_rewrite: Option<ir::PathModifier>,
    /// The mirrors whose backend resolves, in the order of the rule.
    pub mirrors: Vec<Mirror>,
    /// What the share of the backends that do not resolve is answered: the route kind's word.
    pub unresolved_answer: ir::UnresolvedAnswer,
}

/// A backendRef: the Service port it names, or why none, its share of the requests, and the
/// header changes of its own (Gateway API's filters on a backendRef).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackendRef {
    pub backend: Result<ClusterKey, Unresolved>,
    pub weight: u32,
    pub request_headers: ir::HeaderChanges,
    pub response_headers: ir::HeaderChanges,
}

/// A backend that gets a copy of a share of the requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirror {
    pub backend: ClusterKey,
    /// None: every request.
    pub share: Option<ir::Fraction>,
}

impl Route {
    /// Whether the route can be served (by the parents that accept it).
    pub fn servable(&self) -> bool {
        self.refused.is_none()
    }

    /// The IR route of match `match_index` of rule `rule_index`.
    pub fn ir_route(&self, rule_index: usize, match_index: usize) -> Option<ir::Route> {
        let rule = self.rules.get(rule_index)?;
        let route_match = rule.matches.get(match_index)?;
        Some(ir::Route {
            name: format!("{}/{}/rule/{rule_index}/match/{match_index}", self.namespace, self.name),
            path: route_match.path.clone(),
            method: route_match.method.clone(),
            headers: route_match.headers.clone(),
            query_params: route_match.query_params.clone(),
            request_headers: rule.request_headers.clone(),
            response_headers: rule.response_headers.clone(),
            action: match &rule.action {
                Action::Redirect(redirect) => ir::Action::Redirect(redirect.clone()),
                Action::Forward(forward) => ir::Action::Forward(forward.to_ir()),
            },
        })
    }

    /// Where a connection the route takes whole (TLS passthrough) goes: the backends that
    /// resolve of all its rules (a TLSRoute's rules have no matches, so none is preferred),
    /// each once, weights summed, in the order of the rules; and the total weight of those
    /// that do not.
    pub fn passthrough_backends(&self) -> (Vec<ir::WeightedBackend>, u32) {
        let mut backends: Vec<ir::WeightedBackend> = Vec::new();
        let mut unresolved_weight = 0u32;
        let forwards = self.rules.iter().filter_map(|rule| match &rule.action {
            Action::Forward(forward) => Some(forward.to_ir()),
            Action::Redirect(_) => None,
        });
        for forward in forwards {
            unresolved_weight = unresolved_weight.saturating_add(forward.unresolved_weight);
            for backend in forward.backends {
                match backends.iter_mut().find(|known| known.backend == backend.backend) {
                    Some(known) => known.weight = known.weight.saturating_add(backend.weight),
                    None => backends.push(backend),
                }
            }
        }
        (backends, unresolved_weight)
    }

    /// The Service ports the route sends requests to, or copies of them, each once.
    pub fn used_clusters(&self) -> Vec<&ClusterKey> {
        let mut used: Vec<&ClusterKey> = Vec::new();
        for rule in &self.rules {
            let Action::Forward(forward) = &rule.action else { continue };
            let weighted =
                forward.backends.iter().filter(|b| b.weight > 0).filter_map(|b| b.backend.as_ref().ok());
            for key in weighted.chain(forward.mirrors.iter().map(|mirror| &mirror.backend)) {
                if !used.contains(&key) {
                    used.push(key);
                }
            }
        }
        used
    }
}

impl Forward {
    /// The backends that resolve, each once with the same header changes (their weights
    /// summed) in the order of the rule, weight 0 sending nothing; the weight of those that do
    /// not is answered 500.
    fn to_ir(&self) -> ir::Forward {
        let mut backends: Vec<ir::WeightedBackend> = Vec::new();
        let mut unresolved_weight = 0u32;
        for reference in self.backends.iter().filter(|b| b.weight > 0) {
            // Validation bounds them (16 of at most 1_000_000); saturating all the same.
            match &reference.backend {
                Ok(key) => {
                    let weighted = ir::WeightedBackend {
                        request_headers: reference.request_headers.clone(),
                        response_headers: reference.response_headers.clone(),
                        ..ir::WeightedBackend::new(key.cluster_name(), reference.weight)
                    };
                    let same = |known: &&mut ir::WeightedBackend| {
                        known.backend == weighted.backend
                            && known.request_headers == weighted.request_headers
                            && known.response_headers == weighted.response_headers
                    };
                    match backends.iter_mut().find(same) {
                        Some(known) => known.weight = known.weight.saturating_add(reference.weight),
                        None => backends.push(weighted),
                    }
                }
                Err(_) => unresolved_weight = unresolved_weight.saturating_add(reference.weight),
            }
        }
        ir::Forward {
            backends,
            unresolved_weight,
            unresolved_answer: self.unresolved_answer,
            timeout: self.timeout,
            backend_timeout: self.backend_timeout,
            host_rewrite: self.host_rewrite.clone(),
            path_rewrite: self.path_rewrite.clone(),
            mirrors: self
                .mirrors
                .iter()
                .map(|mirror| ir::Mirror { backend: mirror.backend.cluster_name(), share: mirror.share })
                .collect(),
        }
    }
}
