//! What the RBAC of an install allows, decided as the API server's RBAC authorizer does, so
//! tests can replay the requests the operator makes against `deploy/` and find both a request
//! no rule allows and a rule no request uses.
//!
//! A request is a verb on a resource (with its subresource), in a namespace or not, with a
//! name or not: GET of a named object is `get`, of a collection `list`, or `watch` with
//! `watch=true` (a `metadata.name` field selector names the object); POST `create`; PUT
//! `update`; PATCH `patch`, and also `create` when a server-side apply creates the object;
//! DELETE `delete`. A rule allows it when its API group, resource, verb and (for named
//! requests) resource names match, and its binding covers the namespace: a ClusterRoleBinding
//! every namespace and the cluster scope, a RoleBinding only its own namespace.

use std::collections::BTreeSet;

use envoy_operator_core::manifest::parse_documents;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::Value;

/// The operator's ServiceAccount, as `deploy/` names it.
pub const SERVICE_ACCOUNT: (&str, &str) = ("envoy-operator", "envoy-operator");

/// One authorization question.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub verb: String,
    pub group: String,
    /// `resource` or `resource/subresource`.
    pub resource: String,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{} {}/{}", self.verb, group, self.resource)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.namespace {
            Some(namespace) => write!(f, " in {namespace}"),
            None => write!(f, " (cluster-wide)"),
        }
    }
}

/// The accesses an HTTP request to the API server needs.
pub fn accesses(method: &str, path: &str, query: &str, content_type: &str, existed: bool) -> Vec<Access> {
    let Some(target) = super::api_path::Target::parse(path) else {
        return vec![Access {
            verb: method.to_lowercase(),
            group: "<non-resource>".into(),
            resource: path.into(),
            namespace: None,
            name: None,
        }];
    };
    let resource = match &target.subresource {
        Some(sub) => format!("{}/{sub}", target.resource),
        None => target.resource.clone(),
    };
    let field_name = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("fieldSelector="))
        .map(|selector| selector.replace("%3D", "=").replace("%2C", ","))
        .and_then(|selector| {
            selector.split(',').find_map(|term| term.strip_prefix("metadata.name=").map(str::to_owned))
        });
    let watching = query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1");
    let verbs: Vec<&str> = match (method, target.name.is_some()) {
        ("GET", true) => vec!["get"],
        ("GET", false) if watching => vec!["watch"],
        ("GET", false) => vec!["list"],
        ("POST", _) => vec!["create"],
        ("PUT", _) => vec!["update"],
        // An apply creates what does not exist (never a subresource: its object exists).
        ("PATCH", _)
            if content_type.starts_with("application/apply-patch")
                && !existed
                && target.subresource.is_none() =>
        {
            vec!["patch", "create"]
        }
        ("PATCH", _) => vec!["patch"],
        ("DELETE", true) => vec!["delete"],
        ("DELETE", false) => vec!["deletecollection"],
        (other, _) => vec![other],
    };
    verbs
        .into_iter()
        .map(|verb| Access {
            verb: verb.to_owned(),
            group: target.group.clone(),
            resource: resource.clone(),
            namespace: target.namespace.clone(),
            // `create` is never authorized by name; lists and watches are, by field selector.
            name: match verb {
                "create" => None,
                "list" | "watch" => field_name.clone(),
                _ => target.name.clone(),
            },
        })
        .collect()
}

/// Where a binding applies.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Cluster,
    Namespace(String),
}

/// One rule, expanded to a single group, resource, verb and name (`None`: any name), with
/// where its binding applies and which object granted it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    pub scope: Scope,
    pub group: String,
    pub resource: String,
    pub verb: String,
    pub name: Option<String>,
    pub from: String,
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{} {}/{}", self.verb, group, self.resource)?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.scope {
            Scope::Cluster => write!(f, " everywhere")?,
            Scope::Namespace(namespace) => write!(f, " in {namespace}")?,
        }
        write!(f, " ({})", self.from)
    }
}

impl Grant {
    pub fn allows(&self, access: &Access) -> bool {
        let in_scope = match (&self.scope, &access.namespace) {
            (Scope::Cluster, _) => true,
            (Scope::Namespace(bound), Some(namespace)) => bound == namespace,
            (Scope::Namespace(_), None) => false,
        };
        in_scope
            && (self.group == access.group || self.group == "*")
            && (self.resource == access.resource || self.resource == "*")
            && (self.verb == access.verb || self.verb == "*")
            && match (&self.name, &access.name) {
                (None, _) => true,
                (Some(granted), Some(name)) => granted == name,
                (Some(_), None) => false,
            }
    }
}

/// Everything an install grants the operator's ServiceAccount.
#[derive(Clone, Debug, Default)]
pub struct Install {
    pub grants: Vec<Grant>,
}

impl Install {
    /// The grants of RBAC objects among `documents` bound to [`SERVICE_ACCOUNT`].
    pub fn from_documents(documents: &[Value]) -> Self {
        fn of_kind<'a>(documents: &'a [Value], kind: &'static str) -> impl Iterator<Item = &'a Value> {
            documents.iter().filter(move |d| d["kind"] == kind)
        }
        let cluster_roles: Vec<ClusterRole> = of_kind(documents, "ClusterRole")
            .map(|d| serde_json::from_value(d.clone()).expect("a ClusterRole"))
            .collect();
        let roles: Vec<Role> =
            of_kind(documents, "Role").map(|d| serde_json::from_value(d.clone()).expect("a Role")).collect();
        let binds_us = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
            subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == SERVICE_ACCOUNT.1
                    && s.namespace.as_deref() == Some(SERVICE_ACCOUNT.0)
            })
        };
        let mut grants = Vec::new();
        for binding in of_kind(documents, "ClusterRoleBinding") {
            let binding: ClusterRoleBinding =
                serde_json::from_value(binding.clone()).expect("a ClusterRoleBinding");
            if !binds_us(&binding.subjects) {
                continue;
            }
            let role = cluster_roles
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
                .unwrap_or_else(|| {
                    panic!("ClusterRoleBinding to a missing ClusterRole {}", binding.role_ref.name)
                });
            let from = format!("ClusterRole {}", binding.role_ref.name);
            expand(&role.rules.clone().unwrap_or_default(), &Scope::Cluster, &from, &mut grants);
        }
        for binding in of_kind(documents, "RoleBinding") {
            let binding: RoleBinding = serde_json::from_value(binding.clone()).expect("a RoleBinding");
            if !binds_us(&binding.subjects) {
                continue;
            }
            let namespace = binding.metadata.namespace.clone().expect("a RoleBinding names its namespace");
            let rules = match binding.role_ref.kind.as_str() {
                "Role" => roles
                    .iter()
                    .find(|r| {
                        r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str())
                            && r.metadata.namespace.as_deref() == Some(namespace.as_str())
                    })
                    .unwrap_or_else(|| {
                        panic!("RoleBinding to a missing Role {} in {namespace}", binding.role_ref.name)
                    })
                    .rules
                    .clone(),
                _ => cluster_roles
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(binding.role_ref.name.as_str()))
                    .unwrap_or_else(|| {
                        panic!("RoleBinding to a missing ClusterRole {}", binding.role_ref.name)
                    })
                    .rules
                    .clone(),
            };
            let from = format!("{} {} in {namespace}", binding.role_ref.kind, binding.role_ref.name);
            expand(&rules.unwrap_or_default(), &Scope::Namespace(namespace), &from, &mut grants);
        }
        grants.sort();
        grants.dedup();
        Self { grants }
    }

    /// The grants that allow `access`.
    pub fn allowing(&self, access: &Access) -> Vec<&Grant> {
        self.grants.iter().filter(|grant| grant.allows(access)).collect()
    }

    /// Checks every access against the install: returns the accesses nothing allows and the
    /// grants no access used.
    pub fn replay<'a>(&self, accesses: impl IntoIterator<Item = &'a Access>) -> (Vec<Access>, Vec<Grant>) {
        let mut denied = BTreeSet::new();
        let mut used = BTreeSet::new();
        for access in accesses {
            let allowing = self.allowing(access);
            if allowing.is_empty() {
                denied.insert(access.clone());
            }
            used.extend(allowing.into_iter().cloned());
        }
        let unused = self.grants.iter().filter(|grant| !used.contains(*grant)).cloned().collect();
        (denied.into_iter().collect(), unused)
    }
}

fn expand(rules: &[PolicyRule], scope: &Scope, from: &str, grants: &mut Vec<Grant>) {
    for rule in rules {
        assert!(rule.non_resource_urls.is_none(), "{from}: the operator needs no non-resource URLs");
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    for name in &names {
                        grants.push(Grant {
                            scope: scope.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            name: name.clone(),
                            from: from.to_owned(),
                        });
                    }
                }
            }
        }
    }
}

/// The YAML documents of a file under the repository.
pub fn documents(relative: &str) -> Vec<Value> {
    let path = crate::repository().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_documents(&text).into_iter().map(|d| d.content.expect("valid YAML")).collect()
}

/// The cluster-wide install: `deploy/rbac.yaml`.
pub fn cluster_wide() -> Install {
    Install::from_documents(&documents("deploy/rbac.yaml"))
}

/// The namespaced install, as `kubectl apply -k deploy-namespaced/` builds it: the base's
/// RBAC, without what the overlay deletes, with the overlay's own. Only the kustomize features
/// the overlay uses are understood; anything else fails here rather than being misread.
pub fn namespaced() -> (Install, String) {
    let kustomization = &documents("deploy-namespaced/kustomization.yaml")[0];
    let resources: Vec<&str> =
        kustomization["resources"].as_array().expect("resources").iter().filter_map(Value::as_str).collect();
    assert_eq!(resources[0], "../deploy", "the overlay builds on deploy/");
    let mut rbac = documents("deploy/rbac.yaml");
    for patch in kustomization["patches"].as_array().into_iter().flatten() {
        let Some(file) = patch["path"].as_str() else { continue };
        for deletion in documents(&format!("deploy-namespaced/{file}")) {
            assert_eq!(deletion["$patch"], "delete", "{file}: only deletions are read here");
            let before = rbac.len();
            rbac.retain(|d| {
                !(d["kind"] == deletion["kind"] && d["metadata"]["name"] == deletion["metadata"]["name"])
            });
            assert_eq!(before - 1, rbac.len(), "{file}: deletes exactly one object of deploy/rbac.yaml");
        }
    }
    for resource in &resources[1..] {
        rbac.extend(documents(&format!("deploy-namespaced/{resource}")));
    }
    let install = Install::from_documents(&rbac);
    let watched = install
        .grants
        .iter()
        .find_map(|g| match &g.scope {
            Scope::Namespace(ns) if ns != SERVICE_ACCOUNT.0 => Some(ns.clone()),
            _ => None,
        })
        .expect("the overlay grants in a watched namespace");
    (install, watched)
}
