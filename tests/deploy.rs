//! The `deploy/` manifests: RBAC matches the permissions the code lists, and the Deployment
//! is hardened as the README promises.

use std::path::Path;

use envoy_operator::ops::rbac;
use envoy_operator_core::manifest::parse_documents;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use serde_json::Value;

fn documents(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse_documents(&text).into_iter().map(|d| d.content.expect("valid YAML")).collect()
}

fn of_kind<T: serde::de::DeserializeOwned>(file: &str, kind: &str) -> T {
    let document =
        documents(file).into_iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"));
    serde_json::from_value(document).expect("a valid object")
}

/// Rules as sorted (group, resource, name, verb) grants, so ordering and grouping don't matter.
fn grants(rules: &[PolicyRule]) -> Vec<(String, String, String, String)> {
    let mut grants = Vec::new();
    for rule in rules {
        let names = rule.resource_names.clone().unwrap_or_else(|| vec!["*".to_owned()]);
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for name in &names {
                    for verb in &rule.verbs {
                        grants.push((group.clone(), resource.clone(), name.clone(), verb.clone()));
                    }
                }
            }
        }
    }
    grants.sort();
    grants.dedup();
    grants
}

#[test]
fn cluster_role_grants_exactly_what_the_code_uses() {
    let role: ClusterRole = of_kind("rbac.yaml", "ClusterRole");
    assert_eq!(grants(&role.rules.unwrap_or_default()), grants(&rbac::cluster_rules()));
}

#[test]
fn namespaced_role_grants_exactly_what_the_code_uses() {
    let role: Role = of_kind("rbac.yaml", "Role");
    assert_eq!(grants(&role.rules.unwrap_or_default()), grants(&rbac::namespace_rules()));
}

#[test]
fn nothing_is_granted_with_wildcards() {
    for document in documents("rbac.yaml") {
        let text = document.to_string();
        assert!(!text.contains("\"*\""), "{} grants a wildcard", document["metadata"]["name"]);
    }
}

#[test]
fn the_deployment_is_hardened() {
    let deployment: Deployment = of_kind("deployment.yaml", "Deployment");
    let spec = deployment.spec.expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.expect("pod spec");
    let pod_security = pod.security_context.expect("pod securityContext");
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.seccomp_profile.map(|p| p.type_), Some("RuntimeDefault".to_owned()));
    assert!(pod.topology_spread_constraints.is_some_and(|c| !c.is_empty()));
    let container = &pod.containers[0];
    let security = container.security_context.clone().expect("container securityContext");
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.capabilities.and_then(|c| c.drop), Some(vec!["ALL".to_owned()]));
    assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
    let resources = container.resources.clone().expect("resources");
    assert!(resources.requests.is_some() && resources.limits.is_some());
    assert_eq!(pod.service_account_name.as_deref(), Some("envoy-operator"));
}

#[test]
fn kustomization_lists_files_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["deploy", "crds"] {
        let kustomization = &documents_in(root, dir)[0];
        for resource in kustomization["resources"].as_array().expect("resources") {
            let resource = resource.as_str().expect("a path");
            assert!(
                root.join(dir).join(resource).exists(),
                "{dir}/kustomization.yaml lists missing {resource}"
            );
        }
    }
}

fn documents_in(root: &Path, dir: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(root.join(dir).join("kustomization.yaml")).expect("kustomization.yaml");
    parse_documents(&text).into_iter().map(|d| d.content.expect("valid YAML")).collect()
}

#[test]
fn the_deployment_passes_flags_that_run_accepts() {
    let deployment: Deployment = of_kind("deployment.yaml", "Deployment");
    let container = &deployment.spec.expect("spec").template.spec.expect("pod spec").containers[0];
    let args = container.args.clone().expect("args");
    assert_eq!(args[0], "run");
    // clap refuses an unknown flag before it gets to `--help`.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(&args)
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// Kustomize's `namespace:` renames the Namespace and every namespaced object, but leaves the
/// webhooks' selectors as generated: the operator's namespace must stay excluded by its label.
#[test]
fn a_renamed_operator_namespace_stays_out_of_every_webhook() {
    use kube::core::{Selector, SelectorExt};
    let namespace =
        documents("namespace.yaml").into_iter().find(|d| d["kind"] == "Namespace").expect("a Namespace");
    let labels_of = |name: &str| {
        let mut labels: std::collections::BTreeMap<String, String> =
            serde_json::from_value(namespace["metadata"]["labels"].clone()).expect("labels");
        labels.insert("kubernetes.io/metadata.name".to_owned(), name.to_owned());
        labels
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut selectors = Vec::new();
    for file in ["mutating-webhook-configuration.yaml", "validating-webhook-configuration.yaml"] {
        let text =
            std::fs::read_to_string(root.join("webhook-config").join(file)).expect("generated webhooks");
        let configuration = parse_documents(&text).remove(0).content.expect("YAML");
        for webhook in configuration["webhooks"].as_array().expect("webhooks") {
            let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
                serde_json::from_value(webhook["namespaceSelector"].clone()).expect("a namespaceSelector");
            selectors
                .push((webhook["name"].clone(), Selector::try_from(selector).expect("a valid selector")));
        }
    }
    assert_eq!(
        selectors.len(),
        8,
        "Foo, Envoy and EnvoyRoute, mutating and validating; two pod injector webhooks"
    );
    for name in ["envoy-operator", "platform-ops"] {
        for (webhook, selector) in &selectors {
            assert!(
                !selector.matches(&labels_of(name)),
                "{webhook} applies to the operator's namespace {name}"
            );
        }
    }
    // The same selectors do apply to an application namespace (so the check above can fail).
    let shop: std::collections::BTreeMap<String, String> =
        [("kubernetes.io/metadata.name", "shop"), ("envoy-injection", "enabled")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
    assert_eq!(
        selectors.iter().filter(|(_, s)| s.matches(&shop)).count(),
        7,
        "Foo, Envoy and EnvoyRoute (6) and namespace injection"
    );
}
