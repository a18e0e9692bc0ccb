//! One route a fleet's proxies refuse never freezes the fleet: the route that made Envoy NACK a
//! route configuration is found and left out of the fleet's configuration, with Envoy's words
//! in its own status, while every other route keeps flowing.
//!
//! Routes are judged before they reach a proxy (RE2 included, [`crate::rules::re2`]); this is
//! for what Envoy refuses anyway: a limit not modelled, another Envoy version. How the route is
//! found, from what a NACK tells:
//!
//! 1. **Suspects**: the routes of the rejected snapshot version that are new or changed (another
//!    generation) since the version the proxy last accepted of the same type; every route of
//!    the rejected version when the proxy never accepted one. A NACK that no route change
//!    explains (no suspect: a Service's change, say) is left to the fleet's `ConfigAccepted`.
//! 2. **Envoy's words**: Envoy's message quotes what it refused (`invalid repetition size:
//!    {1001}`, `regex '…' …`, a header's name); where some suspects carry such a quoted piece in
//!    their spec and others do not, those are held responsible.
//! 3. Otherwise every suspect is (several routes changed in one batch and the message names
//!    none of them), but never every route of a fleet on a guess: without an accepted version
//!    to compare with, only a route Envoy's words name (or the only route) is. Each is tried
//!    again as soon as it changes.
//!
//! Chosen over pushing candidate halves apart (a bisection across live proxies, each step a
//! push and an ACK round-trip, with proxies of several replicas answering out of step): the
//! usual case, one `kubectl apply` of one route, has a single suspect and is isolated with the
//! very next push.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

/// The kinds of route the operator serves.
pub const ROUTE_KINDS: [&str; 3] = ["EnvoyRoute", "HTTPRoute", "GRPCRoute"];

/// A route, across its versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteId {
    /// One of [`ROUTE_KINDS`].
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl RouteId {
    /// The id of a stored route; `None` without a uid (a route the API server has not stored).
    pub fn of(kind: &'static str, metadata: &ObjectMeta) -> Option<Self> {
        Some(Self {
            kind,
            namespace: metadata.namespace.clone().unwrap_or_default(),
            name: metadata.name.clone()?,
            uid: metadata.uid.clone()?,
        })
    }
}

/// One version of a route, as a snapshot version carried it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteVersion {
    pub generation: i64,
    /// Every string of its spec, one a line: what Envoy's messages may quote.
    pub words: Arc<str>,
}

impl RouteVersion {
    pub fn new(generation: Option<i64>, spec: &impl Serialize) -> Self {
        let mut words = String::new();
        if let Ok(value) = serde_json::to_value(spec) {
            collect_strings(&value, &mut words);
        }
        Self { generation: generation.unwrap_or_default(), words: words.into() }
    }
}

fn collect_strings(value: &serde_json::Value, into: &mut String) {
    match value {
        serde_json::Value::String(text) => {
            into.push_str(text);
            into.push('\n');
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| collect_strings(item, into)),
        serde_json::Value::Object(fields) => fields.values().for_each(|field| collect_strings(field, into)),
        _ => {}
    }
}

/// The routes one snapshot version of a fleet carried.
pub type VersionRoutes = BTreeMap<RouteId, RouteVersion>;

/// The routes to hold responsible for a NACK of the version that carried `rejected`, by a proxy
/// that last accepted the version that carried `accepted` (`None`: it accepted none, or one no
/// longer remembered), given Envoy's `message`. Empty when no route changed; and, where every
/// route of the version is a suspect (nothing accepted to compare with), unless Envoy's words
/// single some out: a fleet is never emptied on a guess.
pub fn culprits(rejected: &VersionRoutes, accepted: Option<&VersionRoutes>, message: &str) -> Vec<RouteId> {
    let suspects: Vec<(&RouteId, &RouteVersion)> = rejected
        .iter()
        .filter(|(id, version)| {
            accepted.is_none_or(|accepted| {
                accepted.get(*id).is_none_or(|was| was.generation != version.generation)
            })
        })
        .collect();
    if suspects.len() <= 1 {
        return suspects.into_iter().map(|(id, _)| id.clone()).collect();
    }
    let quoted = quoted_pieces(message);
    let named: Vec<&RouteId> = suspects
        .iter()
        .filter(|(_, version)| quoted.iter().any(|piece| version.words.contains(piece.as_str())))
        .map(|(id, _)| *id)
        .collect();
    match (named.is_empty() || named.len() == suspects.len(), accepted) {
        (false, _) => named.into_iter().cloned().collect(),
        (true, Some(_)) => suspects.into_iter().map(|(id, _)| id.clone()).collect(),
        (true, None) => Vec::new(),
    }
}

/// The pieces of a route Envoy's message may quote: what stands between single quotes, and what
/// follows the last `": "` (RE2's error argument, `{1001}`); at least two characters each.
fn quoted_pieces(message: &str) -> Vec<String> {
    let mut pieces: Vec<String> = message.split('\'').skip(1).step_by(2).map(str::to_owned).collect();
    if let Some((_, last)) = message.rsplit_once(": ") {
        pieces.push(last.trim().to_owned());
    }
    pieces.retain(|piece| piece.chars().count() >= 2);
    pieces
}

/// Why a route is left out of its fleets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The generation refused: a route that changes is tried again.
    pub generation: i64,
    /// Envoy's message (bounded by the xDS server).
    pub message: String,
}

impl Rejection {
    /// The route's `Accepted=False` message.
    pub fn condition_message(&self) -> String {
        format!(
            "Envoy rejected the configuration this route is part of, so it is served without it until the route changes: {}",
            self.message
        )
    }
}

/// The routes left out of every fleet, by route.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections(BTreeMap<RouteId, Rejection>);

static NO_REJECTIONS: Rejections = Rejections(BTreeMap::new());

impl Rejections {
    /// How many routes are remembered at most: the oldest entries (by id) go first.
    pub const MAX: usize = 4096;

    /// No route rejected.
    pub fn none() -> &'static Self {
        &NO_REJECTIONS
    }

    /// The rejection of this route as it is now, if this very generation was refused.
    pub fn of(&self, kind: &'static str, metadata: &ObjectMeta) -> Option<&Rejection> {
        let id = RouteId::of(kind, metadata)?;
        self.0.get(&id).filter(|rejection| Some(rejection.generation) == metadata.generation)
    }

    /// Records a rejection; true when it is new (not already recorded for that generation).
    pub fn insert(&mut self, id: RouteId, rejection: Rejection) -> bool {
        if self.0.get(&id).is_some_and(|known| known.generation == rejection.generation) {
            return false;
        }
        self.0.insert(id, rejection);
        while self.0.len() > Self::MAX {
            self.0.pop_first();
        }
        true
    }

    /// Forgets the routes for which `keep` says no (routes gone or changed).
    pub fn retain(&mut self, mut keep: impl FnMut(&RouteId, &Rejection) -> bool) {
        self.0.retain(|id, rejection| keep(id, rejection));
    }

    pub fn iter(&self) -> impl Iterator<Item = (&RouteId, &Rejection)> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for &Rejections {
    fn default() -> Self {
        Rejections::none()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id(name: &str) -> RouteId {
        RouteId {
            kind: "EnvoyRoute",
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn version(generation: i64, spec: serde_json::Value) -> RouteVersion {
        RouteVersion::new(Some(generation), &spec)
    }

    fn routes(entries: &[(&str, i64, serde_json::Value)]) -> VersionRoutes {
        entries
            .iter()
            .map(|(name, generation, spec)| (id(name), version(*generation, spec.clone())))
            .collect()
    }

    #[test]
    fn the_one_route_changed_since_the_accepted_version_is_the_culprit() {
        let accepted = routes(&[("a", 1, json!({"p": "/a"})), ("b", 1, json!({"p": "/b"}))]);
        let rejected = routes(&[("a", 1, json!({"p": "/a"})), ("b", 2, json!({"p": "/x{1001}"}))]);
        assert_eq!(culprits(&rejected, Some(&accepted), "anything"), vec![id("b")]);
        // A new route is a suspect as a changed one is.
        let rejected =
            routes(&[("a", 1, json!({"p": "/a"})), ("b", 1, json!({"p": "/b"})), ("c", 1, json!({}))]);
        assert_eq!(culprits(&rejected, Some(&accepted), "anything"), vec![id("c")]);
    }

    #[test]
    fn no_route_change_means_no_culprit() {
        let same = routes(&[("a", 1, json!({"p": "/a"}))]);
        assert!(culprits(&same, Some(&same), "cluster 'x' refused").is_empty());
    }

    #[test]
    fn envoys_words_pick_among_several_suspects() {
        let rejected = routes(&[
            ("a", 1, json!({"rules": [{"path": "/api/(v[0-9]+)"}]})),
            ("b", 1, json!({"rules": [{"path": "/x{1001}"}]})),
            ("c", 1, json!({"rules": [{"path": "/c"}]})),
        ]);
        let nack = "Error adding/updating listener(s) http: invalid repetition size: {1001}";
        assert_eq!(culprits(&rejected, None, nack), vec![id("b")]);
        let nack = "regex '/x{1001}' RE2 program size of 2000 > max program size of 100";
        assert_eq!(culprits(&rejected, None, nack), vec![id("b")]);
    }

    #[test]
    fn words_that_name_no_suspect_or_all_of_them_hold_every_suspect() {
        let accepted = routes(&[("a", 1, json!({"p": "/a"})), ("b", 1, json!({"p": "/b"}))]);
        let rejected = routes(&[("a", 2, json!({"p": "/a2"})), ("b", 2, json!({"p": "/b2"}))]);
        assert_eq!(culprits(&rejected, Some(&accepted), "something: else"), vec![id("a"), id("b")]);
        assert_eq!(culprits(&rejected, Some(&accepted), "paths: '/'"), vec![id("a"), id("b")]);
    }

    #[test]
    fn without_an_accepted_version_only_envoys_words_pick_culprits() {
        let rejected = routes(&[("a", 1, json!({"p": "/a"})), ("b", 1, json!({"p": "/x{1001}"}))]);
        assert_eq!(culprits(&rejected, None, "invalid repetition size: {1001}"), vec![id("b")]);
        assert!(culprits(&rejected, None, "something else").is_empty(), "never every route on a guess");
        let alone = routes(&[("b", 1, json!({"p": "/x{1001}"}))]);
        assert_eq!(culprits(&alone, None, "something else"), vec![id("b")]);
    }

    #[test]
    fn a_rejection_holds_for_its_generation_only() {
        let mut rejections = Rejections::default();
        assert!(rejections.insert(id("b"), Rejection { generation: 2, message: "no".into() }));
        assert!(!rejections.insert(id("b"), Rejection { generation: 2, message: "again".into() }));
        let meta = |generation| ObjectMeta {
            name: Some("b".into()),
            namespace: Some("shop".into()),
            uid: Some("uid-b".into()),
            generation: Some(generation),
            ..ObjectMeta::default()
        };
        assert!(rejections.of("EnvoyRoute", &meta(2)).is_some());
        assert!(rejections.of("EnvoyRoute", &meta(3)).is_none(), "a changed route is tried again");
        assert!(rejections.of("HTTPRoute", &meta(2)).is_none());
        let reused = ObjectMeta { uid: Some("another".into()), ..meta(2) };
        assert!(
            rejections.of("EnvoyRoute", &reused).is_none(),
            "a new route of the same name is not the old one"
        );
    }

    #[test]
    fn rejections_are_bounded() {
        let mut rejections = Rejections::default();
        for i in 0..Rejections::MAX + 10 {
            rejections.insert(id(&format!("r{i:05}")), Rejection { generation: 1, message: String::new() });
        }
        assert_eq!(rejections.iter().count(), Rejections::MAX);
    }
}
