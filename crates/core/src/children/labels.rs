//! Label and annotation keys of the children, and the selectors that find them. Every child
//! carries the managed-by label ([`crate::names::MANAGED_BY_KEY`]), so the controllers watch (and
//! cache) only their own objects.

use std::collections::BTreeMap;

use kube::core::{Expression, Selector};

use crate::names::{MANAGED_BY, MANAGED_BY_KEY};

/// The sample-controller's pod labels for a Foo: `app: nginx`, `controller: <foo name>`.
pub const FOO_APP_KEY: &str = "app";
pub const FOO_APP: &str = "nginx";
pub const FOO_CONTROLLER_KEY: &str = "controller";

/// Labels that make an Envoy's pods unique: two Envoys in one namespace differ in `instance`.
pub const ENVOY_NAME_KEY: &str = "app.kubernetes.io/name";
pub const ENVOY_NAME: &str = "envoy";
pub const ENVOY_INSTANCE_KEY: &str = "app.kubernetes.io/instance";

/// Pod-template annotation carrying the bootstrap hash: a new hash rolls the pods.
pub const CONFIG_HASH_ANNOTATION: &str = "envoy-operator.example.com/config-hash";

type Labels = BTreeMap<String, String>;

fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

fn equal(key: &str, value: &str) -> Expression {
    Expression::Equal(key.to_owned(), value.to_owned())
}

/// Watch selector of every child the operator applies: one watch of Deployments serves the
/// Foos' and the Envoys'.
pub fn managed_children_selector() -> Selector {
    Selector::from_iter([equal(MANAGED_BY_KEY, MANAGED_BY)])
}

/// Watch selector of the ConfigMaps, Deployments and Services Envoys own.
pub fn envoy_children_selector() -> Selector {
    Selector::from_iter([equal(MANAGED_BY_KEY, MANAGED_BY), equal(ENVOY_NAME_KEY, ENVOY_NAME)])
}

/// Pod selector of a Foo's Deployment (immutable once created).
pub fn foo_selector(foo_name: &str) -> Labels {
    labels([(FOO_APP_KEY, FOO_APP), (FOO_CONTROLLER_KEY, foo_name)])
}

/// Labels of a Foo's Deployment and its pods.
pub fn foo_labels(foo_name: &str) -> Labels {
    labels([(FOO_APP_KEY, FOO_APP), (FOO_CONTROLLER_KEY, foo_name), (MANAGED_BY_KEY, MANAGED_BY)])
}

/// Pod selector of an Envoy's Deployment and Service.
pub fn envoy_selector(envoy_name: &str) -> Labels {
    labels([(ENVOY_NAME_KEY, ENVOY_NAME), (ENVOY_INSTANCE_KEY, envoy_name)])
}

/// Labels of an Envoy's children and pods (the fleet label lets the xDS server tell the
/// fleet's pods by their address).
pub fn envoy_labels(envoy_name: &str) -> Labels {
    labels([
        (ENVOY_NAME_KEY, ENVOY_NAME),
        (ENVOY_INSTANCE_KEY, envoy_name),
        (MANAGED_BY_KEY, MANAGED_BY),
        (crate::names::FLEET_LABEL, envoy_name),
    ])
}

/// A label selector as `status.selector` and `kubectl -l` write it: `k=v,k2=v2`.
pub fn selector_string(selector: &Labels) -> String {
    Selector::from_iter(selector.clone()).to_string()
}

#[cfg(test)]
mod tests {
    use kube::core::SelectorExt;

    use super::*;

    #[test]
    fn envoy_selectors_differ_per_instance() {
        assert_ne!(envoy_selector("a"), envoy_selector("b"));
        assert_eq!(
            selector_string(&envoy_selector("edge")),
            "app.kubernetes.io/instance=edge,app.kubernetes.io/name=envoy"
        );
    }

    #[test]
    fn children_match_their_watch_selectors() {
        assert!(managed_children_selector().matches(&foo_labels("x")));
        assert!(managed_children_selector().matches(&envoy_labels("x")));
        assert!(envoy_children_selector().matches(&envoy_labels("x")));
        assert!(!envoy_children_selector().matches(&foo_labels("x")));
        assert_eq!(managed_children_selector().to_string(), "app.kubernetes.io/managed-by=envoy-operator");
        assert_eq!(selector_string(&foo_selector("x")), "app=nginx,controller=x");
    }
}
