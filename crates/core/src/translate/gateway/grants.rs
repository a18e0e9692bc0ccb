//! ReferenceGrants: whether an object of one namespace may reference an object of another. A
//! reference within a namespace needs none; across namespaces, a ReferenceGrant in the target's
//! namespace must allow the referencing kind from the referencing namespace to the target's
//! kind (and name, when the grant names one).

use std::sync::Arc;

use crate::api::gateway::ReferenceGrant;

/// One reference, from an object's group, kind and namespace to an object.
#[derive(Clone, Copy, Debug)]
pub struct Reference<'a> {
    pub from_group: &'a str,
    pub from_kind: &'a str,
    pub from_namespace: &'a str,
    pub to_group: &'a str,
    pub to_kind: &'a str,
    pub to_namespace: &'a str,
    pub to_name: &'a str,
}

/// Whether `reference` is allowed.
pub fn permitted(grants: &[Arc<ReferenceGrant>], reference: &Reference) -> bool {
    if reference.from_namespace == reference.to_namespace {
        return true;
    }
    grants.iter().filter(|grant| grant.metadata.namespace.as_deref() == Some(reference.to_namespace)).any(
        |grant| {
            grant.spec.from.iter().any(|from| {
                from.group == reference.from_group
                    && from.kind == reference.from_kind
                    && from.namespace == reference.from_namespace
            }) && grant.spec.to.iter().any(|to| {
                to.group == reference.to_group
                    && to.kind == reference.to_kind
                    && to.name.as_deref().is_none_or(|name| name == reference.to_name)
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn grant(namespace: &str, spec: serde_json::Value) -> Arc<ReferenceGrant> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1beta1",
                "kind": "ReferenceGrant", "metadata": {"name": "g", "namespace": namespace}, "spec": spec}))
            .unwrap(),
        )
    }

    fn to_secret<'a>(namespace: &'a str, name: &'a str) -> Reference<'a> {
        Reference {
            from_group: "gateway.networking.k8s.io",
            from_kind: "Gateway",
            from_namespace: "infra",
            to_group: "",
            to_kind: "Secret",
            to_namespace: namespace,
            to_name: name,
        }
    }

    #[test]
    fn a_grant_allows_what_it_names_from_where_it_says() {
        let every_secret = grant(
            "web",
            json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra"}],
                   "to": [{"group": "", "kind": "Secret"}]}),
        );
        let one_secret = grant(
            "web",
            json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra"}],
                   "to": [{"group": "", "kind": "Secret", "name": "cert"}]}),
        );
        assert!(permitted(&[], &to_secret("infra", "cert")), "the same namespace needs no grant");
        assert!(!permitted(&[], &to_secret("web", "cert")));
        assert!(permitted(std::slice::from_ref(&every_secret), &to_secret("web", "other")));
        assert!(permitted(std::slice::from_ref(&one_secret), &to_secret("web", "cert")));
        assert!(!permitted(std::slice::from_ref(&one_secret), &to_secret("web", "other")));
        assert!(
            !permitted(&[one_secret], &to_secret("app", "cert")),
            "a grant allows into its namespace only"
        );
        let from_routes = grant(
            "web",
            json!({"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "infra"}],
                   "to": [{"group": "", "kind": "Secret"}]}),
        );
        assert!(!permitted(&[from_routes], &to_secret("web", "cert")), "from another kind");
    }
}
