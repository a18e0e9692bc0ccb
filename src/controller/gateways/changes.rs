//! Which objects a new translation changed the outcome of: what triggers their reconciles.
//!
//! Each controller compares every translation with the one before and reconciles the objects
//! whose outcome appeared, changed or went (a Gateway dropped from the translation, because its
//! class is no longer the operator's, must lose its fleet; a route dropped from it must lose
//! the operator's entries). An unchanged outcome triggers nothing: a translation per change of
//! any input would otherwise reconcile every object each time.

use std::collections::BTreeMap;
use std::sync::Arc;

use envoy_operator_core::api::gateway::{GRPCRoute, Gateway, GatewayClass, HTTPRoute, TLSRoute};
use envoy_operator_core::translate::gateway::{
    ClassOutcome, GatewayOutcome, GatewayTranslation, RouteOutcome,
};
use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

/// The objects of one kind whose outcomes differ between two translations.
pub type Changed<K> = fn(&GatewayTranslation, &GatewayTranslation) -> Vec<ObjectRef<K>>;

/// The references `changed` finds between each translation `translations` receives and the one
/// before it (the first compared with the one current when this is called). Ends when the
/// sender is dropped.
pub fn changes<K>(
    mut translations: watch::Receiver<Arc<GatewayTranslation>>,
    changed: Changed<K>,
) -> impl Stream<Item = ObjectRef<K>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()> + Send + Sync + 'static,
{
    let seen = translations.borrow_and_update().clone();
    let batches = futures::stream::unfold((translations, seen), move |(mut translations, seen)| async move {
        translations.changed().await.ok()?;
        let current = translations.borrow_and_update().clone();
        let touched = changed(&seen, &current);
        Some((futures::stream::iter(touched), (translations, current)))
    });
    futures::StreamExt::flatten(batches)
}

/// Classes whose outcome appeared, changed or went.
pub fn classes(before: &GatewayTranslation, after: &GatewayTranslation) -> Vec<ObjectRef<GatewayClass>> {
    let key = |class: &ClassOutcome| (String::new(), class.name.clone());
    differing(&before.classes, &after.classes, key, PartialEq::eq)
        .into_iter()
        .map(|(_, name)| ObjectRef::new(&name))
        .collect()
}

/// Gateways whose outcome appeared, went, or changed in what the Gateway reconcile writes (its
/// fleet and its status; not the configuration its proxies get over xDS).
pub fn gateways(before: &GatewayTranslation, after: &GatewayTranslation) -> Vec<ObjectRef<Gateway>> {
    let key = |gateway: &GatewayOutcome| (gateway.namespace.clone(), gateway.name.clone());
    differing(&before.gateways, &after.gateways, key, same_writes)
        .into_iter()
        .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
        .collect()
}

/// Whether two outcomes of a Gateway make the same fleet and status.
fn same_writes(a: &GatewayOutcome, b: &GatewayOutcome) -> bool {
    a.uid == b.uid
        && a.generation == b.generation
        && a.fleet == b.fleet
        && a.addresses == b.addresses
        && a.conditions == b.conditions
        && a.listeners == b.listeners
}

/// HTTPRoutes whose outcome appeared, changed or went.
pub fn routes(before: &GatewayTranslation, after: &GatewayTranslation) -> Vec<ObjectRef<HTTPRoute>> {
    routes_of(&before.routes, &after.routes)
}

/// GRPCRoutes whose outcome appeared, changed or went.
pub fn grpc_routes(before: &GatewayTranslation, after: &GatewayTranslation) -> Vec<ObjectRef<GRPCRoute>> {
    routes_of(&before.grpc_routes, &after.grpc_routes)
}

/// TLSRoutes whose outcome appeared, changed or went.
pub fn tls_routes(before: &GatewayTranslation, after: &GatewayTranslation) -> Vec<ObjectRef<TLSRoute>> {
    routes_of(&before.tls_routes, &after.tls_routes)
}

fn routes_of<K: kube::Resource<DynamicType = ()>>(
    before: &[RouteOutcome],
    after: &[RouteOutcome],
) -> Vec<ObjectRef<K>> {
    let key = |route: &RouteOutcome| (route.namespace.clone(), route.name.clone());
    differing(before, after, key, PartialEq::eq)
        .into_iter()
        .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
        .collect()
}

/// The keys of the outcomes in only one of `before` and `after`, or in both but not `same`.
fn differing<O>(
    before: &[O],
    after: &[O],
    key: impl Fn(&O) -> (String, String),
    same: impl Fn(&O, &O) -> bool,
) -> Vec<(String, String)> {
    let before: BTreeMap<_, _> = before.iter().map(|outcome| (key(outcome), outcome)).collect();
    let after: BTreeMap<_, _> = after.iter().map(|outcome| (key(outcome), outcome)).collect();
    let changed = after
        .iter()
        .filter(|(key, outcome)| before.get(*key).is_none_or(|known| !same(known, outcome)))
        .map(|(key, _)| key.clone());
    let gone = before.keys().filter(|key| !after.contains_key(*key)).cloned();
    changed.chain(gone).collect()
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::api::gateway::ParentReference;
    use envoy_operator_core::route::conditions::ConditionState;
    use envoy_operator_core::translate::gateway::ParentOutcome;
    use futures::StreamExt;

    use super::*;

    fn route(name: &str, generation: i64, accepted: bool) -> RouteOutcome {
        RouteOutcome {
            namespace: "shop".into(),
            name: name.into(),
            uid: Some(format!("uid-{name}")),
            generation: Some(generation),
            parents: vec![ParentOutcome {
                parent_ref: ParentReference { name: "edge".into(), ..ParentReference::default() },
                accepted: ConditionState { status: accepted, reason: "Accepted", message: String::new() },
                resolved_refs: ConditionState {
                    status: true,
                    reason: "ResolvedRefs",
                    message: String::new(),
                },
            }],
        }
    }

    fn names(refs: Vec<ObjectRef<HTTPRoute>>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn new_changed_and_vanished_outcomes_are_changes_and_equal_ones_are_not() {
        let before = GatewayTranslation {
            routes: vec![route("kept", 1, true), route("changed", 1, true), route("gone", 1, true)],
            ..GatewayTranslation::default()
        };
        let after = GatewayTranslation {
            routes: vec![route("kept", 1, true), route("changed", 1, false), route("new", 1, true)],
            ..GatewayTranslation::default()
        };
        assert_eq!(names(routes(&before, &after)), ["changed", "new", "gone"]);
        assert!(routes(&after, &after).is_empty());
    }

    #[test]
    fn a_gateways_configuration_alone_is_no_change_for_its_reconcile() {
        let gateway = GatewayOutcome {
            namespace: "shop".into(),
            name: "edge".into(),
            uid: Some("uid-edge".into()),
            generation: Some(1),
            fleet: None,
            ir: Default::default(),
            resources: Default::default(),
            addresses: Vec::new(),
            conditions: Vec::new(),
            listeners: Vec::new(),
        };
        let before = GatewayTranslation { gateways: vec![gateway.clone()], ..GatewayTranslation::default() };
        let mut reconfigured = gateway.clone();
        reconfigured.ir.secrets.push(envoy_operator_core::ir::TlsSecret {
            name: "shop/cert".into(),
            certificate_chain: "chain".into(),
            private_key: "key".into(),
        });
        let after = GatewayTranslation { gateways: vec![reconfigured], ..GatewayTranslation::default() };
        assert!(gateways(&before, &after).is_empty(), "what its proxies serve is the publisher's");
        let mut bumped = gateway.clone();
        bumped.generation = Some(2);
        let after = GatewayTranslation { gateways: vec![bumped], ..GatewayTranslation::default() };
        assert_eq!(gateways(&before, &after), [ObjectRef::new("edge").within("shop")]);
        let gone = gateways(&before, &GatewayTranslation::default());
        assert_eq!(gone, [ObjectRef::new("edge").within("shop")], "a vanished Gateway");
    }

    #[tokio::test]
    async fn the_stream_compares_each_translation_with_the_one_before() {
        let first = GatewayTranslation { routes: vec![route("a", 1, true)], ..GatewayTranslation::default() };
        let (sender, receiver) = watch::channel(Arc::new(first.clone()));
        let mut changed = Box::pin(changes(receiver, routes));
        let second = GatewayTranslation {
            routes: vec![route("a", 1, true), route("b", 1, true)],
            ..GatewayTranslation::default()
        };
        sender.send_replace(Arc::new(second));
        assert_eq!(changed.next().await.map(|r| r.name), Some("b".to_owned()), "a, unchanged, is not told");
        sender.send_replace(Arc::new(first));
        assert_eq!(changed.next().await.map(|r| r.name), Some("b".to_owned()), "b went");
        drop(sender);
        assert!(changed.next().await.is_none());
    }
}
