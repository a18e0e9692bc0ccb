//! The committed `webhook-config/` matches the code, and points at paths the server serves.

use clap::Parser;
use envoy_operator::cli::{Cli, Command};
use envoy_operator::webhook::router::standard_endpoints;
use envoy_operator_core::webhook_config::{MUTATING_FILE, VALIDATING_FILE, WebhookOptions, render};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};

/// What `envoy-operator webhook-config` generates with its default flags, parsed by the real
/// command line.
fn cluster_defaults() -> WebhookOptions {
    let Command::WebhookConfig(args) = Cli::parse_from(["envoy-operator", "webhook-config"]).command else {
        panic!("webhook-config parses as itself");
    };
    args.options().expect("cluster mode reads no files")
}

fn committed(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("webhook-config").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn committed_webhook_configurations_match_the_code() {
    for (name, generated) in render(&cluster_defaults()).unwrap() {
        assert!(
            committed(name) == generated,
            "webhook-config/{name} is out of date; regenerate it with\n  cargo run -- webhook-config --out webhook-config/"
        );
    }
}

#[test]
fn committed_configurations_call_served_paths_for_v1_reviews_without_side_effects() {
    let mut served: Vec<&str> = standard_endpoints().iter().map(|e| e.path).collect();
    served.push(envoy_operator_core::names::INJECT_PATH);
    served.push(envoy_operator_core::names::INJECT_ANNOTATION_PATH);
    let mutating: MutatingWebhookConfiguration = serde_saphyr::from_str(&committed(MUTATING_FILE)).unwrap();
    let validating: ValidatingWebhookConfiguration =
        serde_saphyr::from_str(&committed(VALIDATING_FILE)).unwrap();
    let clients =
        mutating
            .webhooks
            .unwrap()
            .into_iter()
            .map(|w| (w.client_config, w.admission_review_versions, w.side_effects, w.failure_policy))
            .chain(
                validating.webhooks.unwrap().into_iter().map(|w| {
                    (w.client_config, w.admission_review_versions, w.side_effects, w.failure_policy)
                }),
            );
    let mut count = 0;
    for (client, versions, side_effects, failure_policy) in clients {
        let path = client.service.and_then(|s| s.path).expect("a service path");
        assert!(served.contains(&path.as_str()), "{path} is not served");
        assert_eq!(versions, ["v1"]);
        assert_eq!(side_effects, "None");
        // Our own kinds fail closed; the pod injector must never block pod creation.
        let expected = if path.starts_with("/inject") { "Ignore" } else { "Fail" };
        assert_eq!(failure_policy.as_deref(), Some(expected), "{path}");
        count += 1;
    }
    assert_eq!(count, 9, "Foo, Envoy and EnvoyRoute, mutating and validating; three pod webhooks");
}

/// The committed annotation webhook's `matchCondition`, run as CEL over pods as the API server
/// binds them (`object`): only a pod annotated `sidecar.example.com/inject: "true"` is sent.
#[test]
fn only_pods_annotated_to_opt_in_match_the_annotation_webhook() {
    use kube_cel::cel::{Context, Program, Value as Cel};
    let mutating: MutatingWebhookConfiguration = serde_saphyr::from_str(&committed(MUTATING_FILE)).unwrap();
    let webhook = mutating
        .webhooks
        .unwrap()
        .into_iter()
        .find(|w| w.name == "annotation.sidecar.example.com")
        .expect("the annotation webhook");
    let conditions = webhook.match_conditions.expect("matchConditions");
    let matches = |pod: serde_json::Value| {
        let mut context = Context::default();
        context.add_variable("object", pod).unwrap();
        conditions.iter().all(|condition| {
            let program = Program::compile(&condition.expression).expect("CEL");
            match program.execute(&context) {
                Ok(Cel::Bool(matched)) => matched,
                other => panic!("{} gave {other:?}", condition.expression),
            }
        })
    };
    let pod =
        |metadata: serde_json::Value| serde_json::json!({"metadata": metadata, "spec": {"containers": []}});
    assert!(matches(pod(serde_json::json!({"annotations": {"sidecar.example.com/inject": "true"}}))));
    for other in [
        serde_json::json!({}),
        serde_json::json!({"annotations": {}}),
        serde_json::json!({"annotations": {"sidecar.example.com/inject": "false"}}),
        serde_json::json!({"annotations": {"sidecar.example.com/envoy": "true", "other": "true"}}),
    ] {
        assert!(!matches(pod(other.clone())), "{other}");
    }
}
