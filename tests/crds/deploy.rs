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

fn named<T: serde::de::DeserializeOwned>(file: &str, kind: &str, name: &str) -> T {
    let document = documents(file)
        .into_iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {file}"));
    serde_json::from_value(document).expect("a valid object")
}

#[test]
fn cluster_role_grants_exactly_what_the_code_uses() {
    let role: ClusterRole = named("rbac.yaml", "ClusterRole", "envoy-operator");
    assert_eq!(grants(&role.rules.unwrap_or_default()), grants(&rbac::cluster_rules()));
    let configurations: ClusterRole =
        named("rbac.yaml", "ClusterRole", "envoy-operator-webhook-configurations");
    assert_eq!(
        grants(&configurations.rules.unwrap_or_default()),
        grants(&rbac::webhook_configuration_rules())
    );
    let gateway_classes: ClusterRole = named("rbac.yaml", "ClusterRole", "envoy-operator-gateway-classes");
    assert_eq!(grants(&gateway_classes.rules.unwrap_or_default()), grants(&rbac::gateway_class_rules()));
    let certificates: ClusterRole = named("rbac.yaml", "ClusterRole", "envoy-operator-gateway-certificates");
    assert_eq!(grants(&certificates.rules.unwrap_or_default()), grants(&rbac::gateway_certificate_rules()));
}

#[test]
fn the_namespaced_install_grants_the_same_in_its_namespace_only() {
    let role: Role = of_kind("../deploy-namespaced/rbac.yaml", "Role");
    assert_eq!(grants(&role.rules.unwrap_or_default()), grants(&rbac::workload_rules()));
    let watched = role.metadata.namespace.expect("a namespace");
    let kustomization = &documents("../deploy-namespaced/kustomization.yaml")[0];
    let text = kustomization.to_string();
    assert!(
        text.contains(&format!("--watch-namespace={watched}")),
        "the Deployment watches the namespace the Role is in ({watched})"
    );
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
    for dir in ["deploy", "deploy-namespaced", "deploy/admission-policy", "crds"] {
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
        9,
        "Foo, Envoy and EnvoyRoute, mutating and validating; three pod webhooks (namespace, pod label, opt-in annotation)"
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

/// Whether the admission policy lets `username` do `operation` on an object with these
/// labels before and after, in `namespace`: `None` when the policy does not apply to them.
///
/// The expressions run on the `cel` crate with the variables the API server binds (`object`,
/// `oldObject`, `request`); kube-cel's own VAP evaluator escapes every map key (`.` and `/`
/// in label keys), which the API server does only for schema properties.
fn policy_verdict(
    (resource, secret_type): (&str, Option<&str>),
    username: &str,
    operation: &str,
    namespace: &str,
    old: Option<Value>,
    new: Option<Value>,
) -> Option<Result<(), Vec<String>>> {
    use kube_cel::cel::{Context, Program, Value as Cel};
    let policy = documents("admission-policy/policy.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("a ValidatingAdmissionPolicy");
    let object = |labels: Option<Value>| match labels {
        Some(labels) => {
            let mut object =
                serde_json::json!({"metadata": {"name": "x", "namespace": namespace, "labels": labels}});
            if let Some(secret_type) = secret_type {
                object["type"] = serde_json::json!(secret_type);
            }
            object
        }
        None => Value::Null,
    };
    let mut context = Context::default();
    context.add_variable("object", object(new)).unwrap();
    context.add_variable("oldObject", object(old)).unwrap();
    let request = serde_json::json!({"operation": operation, "namespace": namespace, "userInfo": {"username": username},
        "resource": {"group": "", "version": "v1", "resource": resource}});
    context.add_variable("request", request).unwrap();
    let run = |field: &str| -> Vec<(bool, String)> {
        policy["spec"][field]
            .as_array()
            .expect(field)
            .iter()
            .map(|e| {
                let expression = e["expression"].as_str().expect("an expression");
                let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
                match program.execute(&context) {
                    Ok(Cel::Bool(passed)) => (passed, e["message"].as_str().unwrap_or(expression).to_owned()),
                    other => panic!("{expression} gave {other:?}"),
                }
            })
            .collect()
    };
    if !run("matchConditions").iter().all(|(passed, _)| *passed) {
        return None;
    }
    let failed: Vec<String> =
        run("validations").into_iter().filter(|(passed, _)| !passed).map(|(_, m)| m).collect();
    Some(if failed.is_empty() { Ok(()) } else { Err(failed) })
}

const DEPLOYMENTS: (&str, Option<&str>) = ("deployments", None);

#[test]
fn the_admission_policy_confines_the_operator_to_its_own_children() {
    let operator = "system:serviceaccount:envoy-operator:envoy-operator";
    let ours = || Some(serde_json::json!({"app.kubernetes.io/managed-by": "envoy-operator", "app": "nginx"}));
    let foreign = || Some(serde_json::json!({"app": "nginx"}));
    assert_eq!(policy_verdict(DEPLOYMENTS, operator, "CREATE", "apps", None, ours()), Some(Ok(())));
    assert_eq!(policy_verdict(DEPLOYMENTS, operator, "UPDATE", "apps", ours(), ours()), Some(Ok(())));
    assert_eq!(policy_verdict(DEPLOYMENTS, operator, "DELETE", "apps", ours(), None), Some(Ok(())));
    let refused = |verdict: Option<Result<(), Vec<String>>>| matches!(verdict, Some(Err(messages)) if !messages.is_empty());
    assert!(
        refused(policy_verdict(DEPLOYMENTS, operator, "CREATE", "apps", None, foreign())),
        "an unlabelled object"
    );
    assert!(refused(policy_verdict(
        DEPLOYMENTS,
        operator,
        "CREATE",
        "apps",
        None,
        Some(serde_json::json!({}))
    )));
    assert!(
        refused(policy_verdict(DEPLOYMENTS, operator, "UPDATE", "apps", foreign(), ours())),
        "taking one over"
    );
    assert!(
        refused(policy_verdict(DEPLOYMENTS, operator, "UPDATE", "apps", ours(), foreign())),
        "dropping the label"
    );
    assert!(
        refused(policy_verdict(DEPLOYMENTS, operator, "DELETE", "apps", foreign(), None)),
        "deleting a foreign one"
    );
    assert!(
        refused(policy_verdict(DEPLOYMENTS, operator, "CREATE", "kube-system", None, ours())),
        "kube-system"
    );
    assert_eq!(
        policy_verdict(DEPLOYMENTS, "alice", "CREATE", "apps", None, foreign()),
        None,
        "others are not affected"
    );

    // Of Secrets, only the operator's certificates.
    let tls = ("secrets", Some("kubernetes.io/tls"));
    assert_eq!(policy_verdict(tls, operator, "CREATE", "apps", None, ours()), Some(Ok(())));
    assert_eq!(policy_verdict(tls, operator, "UPDATE", "apps", ours(), ours()), Some(Ok(())));
    assert!(refused(policy_verdict(("secrets", Some("Opaque")), operator, "CREATE", "apps", None, ours())));
    assert!(refused(policy_verdict(("secrets", None), operator, "CREATE", "apps", None, ours())));
    assert!(
        refused(policy_verdict(tls, operator, "UPDATE", "apps", foreign(), ours())),
        "taking a Secret over"
    );
}

#[test]
fn the_admission_policy_covers_every_resource_the_operator_writes() {
    let policy = documents("admission-policy/policy.yaml")
        .into_iter()
        .find(|d| d["kind"] == "ValidatingAdmissionPolicy")
        .expect("a ValidatingAdmissionPolicy");
    let mut covered: Vec<(String, String)> = Vec::new();
    for rule in policy["spec"]["matchConstraints"]["resourceRules"].as_array().expect("resourceRules") {
        let operations: Vec<&str> =
            rule["operations"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert_eq!(operations, ["CREATE", "UPDATE", "DELETE"]);
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                covered.push((group.as_str().unwrap().to_owned(), resource.as_str().unwrap().to_owned()));
            }
        }
    }
    let mut written: Vec<(String, String)> = Vec::new();
    for rule in rbac::workload_rules() {
        if !rule.verbs.iter().any(|v| v == "create" || v == "patch" || v == "delete") {
            continue;
        }
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten().filter(|r| !r.contains('/')) {
                // Events name no label; RBAC limits them to create and patch.
                if resource != "events" {
                    written.push((group.clone(), resource.clone()));
                }
            }
        }
    }
    covered.sort();
    written.sort();
    assert_eq!(covered, written);
}

#[test]
fn the_namespace_enforces_the_restricted_pod_security_standard() {
    let namespace = &documents("namespace.yaml")[0];
    let labels = &namespace["metadata"]["labels"];
    for mode in ["enforce", "audit", "warn"] {
        assert_eq!(labels[format!("pod-security.kubernetes.io/{mode}")], "restricted", "{mode}");
    }
}

#[test]
fn ingress_reaches_the_webhook_xds_and_metrics_ports_only() {
    let deployment: Deployment = of_kind("deployment.yaml", "Deployment");
    let template = deployment.spec.expect("spec").template;
    let pod_labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    let ports: Vec<String> = template.spec.expect("pod spec").containers[0]
        .ports
        .iter()
        .flatten()
        .filter_map(|p| p.name.clone())
        .collect();
    let policy = documents("networkpolicy.yaml").into_iter().next().expect("a NetworkPolicy");
    assert_eq!(policy["kind"], "NetworkPolicy");
    for (key, value) in policy["spec"]["podSelector"]["matchLabels"].as_object().expect("matchLabels") {
        assert_eq!(pod_labels.get(key).map(String::as_str), value.as_str(), "selects the operator's pods");
    }
    assert_eq!(policy["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
    let mut allowed: Vec<&str> = policy["spec"]["ingress"]
        .as_array()
        .expect("ingress rules")
        .iter()
        .flat_map(|rule| rule["ports"].as_array().into_iter().flatten())
        .filter_map(|port| port["port"].as_str())
        .collect();
    allowed.sort_unstable();
    assert_eq!(allowed, ["metrics", "webhook", "xds"]);
    assert!(allowed.iter().all(|port| ports.iter().any(|p| p == port)), "named ports of the container");
    let ingress = policy["spec"]["ingress"].as_array().expect("ingress rules");
    let rule_of = |port: &str| {
        ingress
            .iter()
            .find(|rule| rule["ports"].as_array().into_iter().flatten().any(|p| p["port"] == port))
            .expect("a rule for the port")
    };
    let metrics = rule_of("metrics");
    assert!(
        metrics["from"][0]["namespaceSelector"].is_object(),
        "metrics only from the monitoring namespace"
    );
}

#[test]
fn termination_leaves_time_for_the_pre_stop_the_drain_and_reviews_in_flight() {
    let deployment: Deployment = of_kind("deployment.yaml", "Deployment");
    let pod = deployment.spec.expect("spec").template.spec.expect("pod spec");
    let container = &pod.containers[0];
    let pre_stop = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.pre_stop.as_ref())
        .and_then(|h| h.sleep.as_ref())
        .map(|s| s.seconds)
        .expect("a preStop sleep");
    let drain: i64 = container
        .args
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--drain-seconds="))
        .and_then(|s| s.parse().ok())
        .expect("--drain-seconds");
    let grace = envoy_operator::webhook::serve::WebhookConfig::default().shutdown_grace.as_secs() as i64;
    let period = pod.termination_grace_period_seconds.expect("terminationGracePeriodSeconds");
    assert!(pre_stop > 0 && drain > 0);
    assert!(pre_stop + drain + grace <= period, "{pre_stop} + {drain} + {grace} > {period}");
}

#[test]
fn fleets_reach_the_xds_port_by_the_service_their_bootstraps_name() {
    let service = documents("service.yaml")
        .into_iter()
        .find(|document| document["metadata"]["name"] == envoy_operator_core::names::XDS_SERVICE)
        .expect("the xDS Service");
    let port = &service["spec"]["ports"][0];
    assert_eq!(port["port"], envoy_operator_core::names::XDS_PORT);
    assert_eq!(port["targetPort"], "xds");
    let deployment: Deployment = of_kind("deployment.yaml", "Deployment");
    let container = deployment.spec.expect("spec").template.spec.expect("pod spec").containers.remove(0);
    let xds =
        container.ports.iter().flatten().find(|p| p.name.as_deref() == Some("xds")).expect("an xds port");
    let listen: std::net::SocketAddr = envoy_operator_core::names::XDS_LISTEN.parse().expect("an address");
    assert_eq!(xds.container_port, i32::from(listen.port()), "the port `run --xds-listen` binds by default");
}

/// The namespaced install's kustomization, as YAML.
fn namespaced_kustomization() -> Value {
    documents("../deploy-namespaced/kustomization.yaml").remove(0)
}

/// The webhook configurations `kubectl apply -k deploy-namespaced/` applies: the generated ones
/// of `webhook-config/`, with the overlay's JSON 6902 patches applied as kustomize applies them
/// (its `test` operations included).
fn namespaced_webhook_configurations() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut configurations = Vec::new();
    for file in ["mutating-webhook-configuration.yaml", "validating-webhook-configuration.yaml"] {
        let text =
            std::fs::read_to_string(root.join("webhook-config").join(file)).expect("generated webhooks");
        configurations.push(parse_documents(&text).remove(0).content.expect("YAML"));
    }
    for patch in namespaced_kustomization()["patches"].as_array().expect("patches") {
        let target = &patch["target"];
        let Some(configuration) = configurations
            .iter_mut()
            .find(|c| c["kind"] == target["kind"] && c["metadata"]["name"] == target["name"])
        else {
            continue;
        };
        let operations = parse_documents(patch["patch"].as_str().expect("an inline JSON 6902 patch"))
            .remove(0)
            .content
            .expect("YAML");
        let operations: json_patch::Patch = serde_json::from_value(operations).expect("JSON 6902 operations");
        json_patch::patch(configuration, &operations)
            .unwrap_or_else(|error| panic!("the overlay's patch of {}: {error}", target["kind"]));
    }
    configurations
}

/// Namespaces by their labels, as webhooks' `namespaceSelector`s see them: `name`, labelled
/// for injection or not.
fn namespace_labels(name: &str) -> [std::collections::BTreeMap<String, String>; 2] {
    let plain: std::collections::BTreeMap<String, String> =
        [("kubernetes.io/metadata.name".to_owned(), name.to_owned())].into();
    let mut injected = plain.clone();
    injected.insert("envoy-injection".to_owned(), "enabled".to_owned());
    [plain, injected]
}

/// A Foo in `default` was admitted by the namespaced install's webhooks and never reconciled:
/// every webhook of that install covers the watched namespace, and only it.
#[test]
fn the_namespaced_installs_webhooks_cover_the_watched_namespace_only() {
    use kube::core::{Selector, SelectorExt};
    let (_, watched) = namespaced_role();
    let configurations = namespaced_webhook_configurations();
    let mut webhooks = 0;
    for configuration in &configurations {
        for webhook in configuration["webhooks"].as_array().expect("webhooks") {
            webhooks += 1;
            let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
                serde_json::from_value(webhook["namespaceSelector"].clone()).expect("a namespaceSelector");
            let selector = Selector::try_from(selector).expect("a valid selector");
            let name = &webhook["name"];
            assert!(
                namespace_labels(&watched).iter().any(|labels| selector.matches(labels)),
                "{name} does not apply to the watched namespace {watched}"
            );
            for elsewhere in ["default", "shop", "kube-system", "envoy-operator"] {
                assert!(
                    !namespace_labels(elsewhere).iter().any(|labels| selector.matches(labels)),
                    "{name} applies to {elsewhere}, which the namespaced install does not reconcile"
                );
            }
        }
    }
    assert_eq!(
        webhooks, 9,
        "Foo, Envoy and EnvoyRoute, mutating and validating; three pod webhooks (namespace, pod label, opt-in annotation)"
    );

    // The cluster-wide install's webhooks do apply elsewhere (so the check above can fail).
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("webhook-config/validating-webhook-configuration.yaml"),
    )
    .expect("generated webhooks");
    let generated = parse_documents(&text).remove(0).content.expect("YAML");
    let selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector =
        serde_json::from_value(generated["webhooks"][0]["namespaceSelector"].clone()).expect("a selector");
    assert!(Selector::try_from(selector).expect("valid").matches(&namespace_labels("default")[0]));
}

/// The namespaced install's Role, and the namespace it is in (the watched one).
fn namespaced_role() -> (Role, String) {
    let role: Role = of_kind("../deploy-namespaced/rbac.yaml", "Role");
    let namespace = role.metadata.namespace.clone().expect("a namespace");
    (role, namespace)
}

/// `kubectl apply -k deploy-namespaced/` on a fresh cluster failed with `namespaces "apps" not
/// found`: every namespace the overlay's own objects are in is created by the install.
#[test]
fn the_namespaced_install_creates_the_namespaces_it_uses() {
    let kustomization = namespaced_kustomization();
    let resources: Vec<&str> =
        kustomization["resources"].as_array().expect("resources").iter().filter_map(Value::as_str).collect();
    assert_eq!(resources.first(), Some(&"../deploy"), "the overlay builds on deploy/");
    let overlay: Vec<Value> =
        resources[1..].iter().flat_map(|file| documents(&format!("../deploy-namespaced/{file}"))).collect();
    let mut created: Vec<String> = documents("namespace.yaml")
        .into_iter()
        .chain(overlay.iter().cloned())
        .filter(|d| d["kind"] == "Namespace")
        .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    created.sort();
    let (_, watched) = namespaced_role();
    assert!(created.contains(&watched), "the watched namespace {watched} is created: {created:?}");
    for object in &overlay {
        if let Some(namespace) = object["metadata"]["namespace"].as_str() {
            assert!(
                created.iter().any(|c| c == namespace),
                "{} {} is in namespace {namespace}, which the install does not create ({created:?})",
                object["kind"],
                object["metadata"]["name"]
            );
        }
    }
}

/// Switching from the cluster-wide install: `kubectl apply` never deletes, so README.md (and
/// the overlay's own comment) name exactly the objects the namespaced install drops.
#[test]
fn switching_to_the_namespaced_install_deletes_what_it_drops() {
    let mut dropped: Vec<String> = Vec::new();
    for patch in namespaced_kustomization()["patches"].as_array().expect("patches") {
        let Some(file) = patch["path"].as_str() else { continue };
        for deletion in documents(&format!("../deploy-namespaced/{file}")) {
            assert_eq!(deletion["$patch"], "delete", "{file}");
            let kind = deletion["kind"].as_str().expect("a kind").to_lowercase();
            dropped.push(format!("{kind}/{}", deletion["metadata"]["name"].as_str().expect("a name")));
        }
    }
    dropped.sort();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (file, text) in [
        ("README.md", std::fs::read_to_string(root.join("README.md")).expect("README.md")),
        (
            "deploy-namespaced/kustomization.yaml",
            std::fs::read_to_string(root.join("deploy-namespaced/kustomization.yaml"))
                .expect("kustomization"),
        ),
    ] {
        let deleted = text
            .lines()
            .filter_map(|line| line.trim_start_matches(['#', ' ']).strip_prefix("kubectl delete "))
            .map(|objects| {
                let mut objects: Vec<String> = objects.split_whitespace().map(str::to_owned).collect();
                objects.sort();
                objects
            })
            .find(|objects| objects.iter().any(|o| o.starts_with("clusterrole")))
            .unwrap_or_else(|| panic!("{file} says which objects to delete when switching"));
        assert_eq!(deleted, dropped, "{file}");
    }
}

/// Where kubectl is installed, its kustomize builds the webhook configurations this file's own
/// reading of the overlay does.
#[test]
fn the_namespaced_webhooks_read_here_are_what_kustomize_builds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(output) =
        std::process::Command::new("kubectl").arg("kustomize").arg(root.join("deploy-namespaced")).output()
    else {
        eprintln!("kubectl is not installed: the overlay is read by this file's own reading only");
        return;
    };
    assert!(output.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&output.stderr));
    let built: Vec<Value> = parse_documents(&String::from_utf8_lossy(&output.stdout))
        .into_iter()
        .map(|d| d.content.expect("valid YAML"))
        .filter(|d| d["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")))
        .collect();
    let read = namespaced_webhook_configurations();
    assert_eq!(built.len(), read.len());
    for configuration in &read {
        let kustomized = built.iter().find(|b| b["kind"] == configuration["kind"]).expect("built");
        assert_eq!(kustomized["webhooks"], configuration["webhooks"], "{}", configuration["kind"]);
    }
}
