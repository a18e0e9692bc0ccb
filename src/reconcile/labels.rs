//! Label and annotation keys of the children, and the selectors that find them. Every child
//! carries `app.kubernetes.io/managed-by: envoy-operator`, so the controller watches (and
//! caches) only its own objects.

use std::collections::BTreeMap;

/// Field manager of every server-side apply, for children and status alike.
pub const FIELD_MANAGER: &str = "envoy-operator";
/// Reporter of the events the controller records.
pub const REPORTER: &str = "envoy-operator";

pub const MANAGED_BY_KEY: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "envoy-operator";

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

/// Watch selector of the Deployments Foos own.
pub const FOO_CHILDREN_SELECTOR: &str = "app.kubernetes.io/managed-by=envoy-operator,app=nginx,controller";
/// Watch selector of the ConfigMaps, Deployments and Services Envoys own.
pub const ENVOY_CHILDREN_SELECTOR: &str =
    "app.kubernetes.io/managed-by=envoy-operator,app.kubernetes.io/name=envoy";

type Labels = BTreeMap<String, String>;

fn labels<const N: usize>(pairs: [(&str, &str); N]) -> Labels {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
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

/// Labels of an Envoy's children and pods.
pub fn envoy_labels(envoy_name: &str) -> Labels {
    labels([(ENVOY_NAME_KEY, ENVOY_NAME), (ENVOY_INSTANCE_KEY, envoy_name), (MANAGED_BY_KEY, MANAGED_BY)])
}

/// A label selector as `status.selector` and `kubectl -l` write it: `k=v,k2=v2`.
pub fn selector_string(selector: &Labels) -> String {
    selector.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
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
        // Every label a watch selector names (key or key=value) is on the children.
        let check = |selector: &str, labels: &Labels| {
            for term in selector.split(',') {
                match term.split_once('=') {
                    Some((k, v)) => assert_eq!(labels.get(k).map(String::as_str), Some(v), "{term}"),
                    None => assert!(labels.contains_key(term), "{term}"),
                }
            }
        };
        check(FOO_CHILDREN_SELECTOR, &foo_labels("x"));
        check(ENVOY_CHILDREN_SELECTOR, &envoy_labels("x"));
        assert_eq!(selector_string(&foo_selector("x")), "app=nginx,controller=x");
    }
}
