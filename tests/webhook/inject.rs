//! The `/inject` endpoint: the injector behind the AdmissionReview contract, over the router.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use envoy_operator::operator::metrics::OperatorMetrics;
use envoy_operator::webhook::inject::endpoint;
use envoy_operator::webhook::router::{Limits, Readiness, router, standard_endpoints};
use envoy_operator_core::inject::{InjectConfig, NoEnvoys};
use serde_json::Value;
use tower::ServiceExt;

use crate::common::{patch_of, response_of};

fn pod_fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inject").join(name);
    serde_json::from_slice(&std::fs::read(path).expect("fixture")).expect("JSON")
}

async fn inject(review: &Value, metrics: &OperatorMetrics) -> (StatusCode, Value) {
    let mut endpoints = standard_endpoints();
    endpoints.push(endpoint(InjectConfig::default(), std::sync::Arc::new(NoEnvoys), metrics.webhook.clone()));
    let app = router(&endpoints, Readiness::default(), Limits::default(), metrics.webhook.clone());
    let request = Request::post("/inject?timeout=5s")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, response_of(&body))
}

#[tokio::test]
async fn a_replicaset_pod_gets_the_sidecar_and_a_second_pass_changes_nothing() {
    let metrics = OperatorMetrics::new();
    let review = pod_fixture("pod-create-from-replicaset-mutate.json");
    let (status, response) = inject(&review, &metrics).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["uid"], review["request"]["uid"]);
    assert_eq!(response["allowed"], true);
    let patch = patch_of(&response).expect("a patch");
    let mut pod = review["request"]["object"].clone();
    json_patch::patch(&mut pod, &patch).expect("the patch applies to the pod as sent");
    let containers = pod["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.iter().filter(|c| c["name"] == "envoy").count(), 1);
    assert!(pod["metadata"]["annotations"]["sidecar.example.com/status"].is_string());

    let mut again = review.clone();
    again["request"]["object"] = pod;
    let (_, second) = inject(&again, &metrics).await;
    assert_eq!(second["allowed"], true);
    assert!(patch_of(&second).is_none(), "an injected pod gets no patch");

    let text = metrics.encode();
    assert!(text.contains("envoy_operator_sidecar_injections_total 1"), "{text}");
    assert!(text.contains("envoy_operator_sidecar_skips_total{reason=\"already_injected\"} 1"), "{text}");
    assert!(
        text.contains("envoy_operator_admission_requests_total{endpoint=\"inject\",decision=\"patched\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn skips_are_allowed_untouched_and_counted_by_reason() {
    let metrics = OperatorMetrics::new();
    for fixture in ["pod-host-network.json", "pod-opted-out.json", "pod-in-kube-system.json"] {
        let (status, response) = inject(&pod_fixture(fixture), &metrics).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(response["allowed"], true, "{fixture}");
        assert!(patch_of(&response).is_none(), "{fixture} is left alone");
    }
    let text = metrics.encode();
    for reason in ["host_network", "opted_out", "excluded_namespace"] {
        assert!(
            text.contains(&format!("envoy_operator_sidecar_skips_total{{reason=\"{reason}\"}} 1")),
            "{reason}: {text}"
        );
    }
}

#[tokio::test]
async fn a_pod_that_cannot_have_the_sidecar_it_asks_for_is_told_why() {
    let metrics = OperatorMetrics::new();
    let (_, response) = inject(&pod_fixture("pod-host-network.json"), &metrics).await;
    assert_eq!(response["allowed"], true);
    let warning = response["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.starts_with("sidecar not injected: the pod uses hostNetwork"), "{response}");
    let (_, response) = inject(&pod_fixture("pod-opted-out.json"), &metrics).await;
    assert!(response.get("warnings").is_none(), "an opt-out by label is as documented: {response}");
}

#[tokio::test]
async fn an_invalid_annotation_is_denied_with_its_reason() {
    let metrics = OperatorMetrics::new();
    let (status, response) = inject(&pod_fixture("pod-invalid-xds-annotation.json"), &metrics).await;
    assert_eq!(status, StatusCode::OK, "a denial is an answer, not an HTTP error");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("sidecar.example.com/xds"), "{message}");
    let text = metrics.encode();
    assert!(text.contains("envoy_operator_sidecar_denials_total{reason=\"invalid_annotation\"} 1"), "{text}");
    assert!(
        !text.contains("envoy_operator_sidecar_skips_total{reason=\"invalid_annotation\"}"),
        "a denial is no skip"
    );
}

#[tokio::test]
async fn other_kinds_and_operations_pass_untouched() {
    let metrics = OperatorMetrics::new();
    let mut update = pod_fixture("pod-create-direct-mutate.json");
    update["request"]["operation"] = "UPDATE".into();
    update["request"]["oldObject"] = update["request"]["object"].clone();
    let (_, response) = inject(&update, &metrics).await;
    assert_eq!((response["allowed"].clone(), patch_of(&response)), (Value::Bool(true), None));

    let foo: Value = serde_json::from_slice(&crate::common::fixture("foo-create-mutate.json")).unwrap();
    let (_, response) = inject(&foo, &metrics).await;
    assert_eq!((response["allowed"].clone(), patch_of(&response)), (Value::Bool(true), None));
}

#[tokio::test]
async fn a_pod_with_20000_volumes_is_answered_with_the_cap_it_exceeds() {
    // Many volumes, yet under the router's cap on JSON values (50,000): the injector's own
    // volume cap answers, in an AdmissionReview.
    let metrics = OperatorMetrics::new();
    let mut review = pod_fixture("pod-create-from-replicaset-mutate.json");
    let volumes: Vec<Value> =
        (0..20_000).map(|n| serde_json::json!({"name": format!("envoy-tmp-{n}")})).collect();
    review["request"]["object"]["spec"]["volumes"] = Value::Array(volumes);
    let (status, response) = inject(&review, &metrics).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with("the pod has 20000 volumes, more than the 1024"), "{message}");
    assert!(metrics.encode().contains("envoy_operator_sidecar_denials_total{reason=\"too_large\"} 1"));
}

#[tokio::test]
async fn unknown_annotations_give_a_bounded_list_of_warnings() {
    let metrics = OperatorMetrics::new();
    let mut review = pod_fixture("pod-create-from-replicaset-mutate.json");
    let annotations: serde_json::Map<String, Value> = (0..1000)
        .map(|n| (format!("sidecar.example.com/typo-{n}-{}", "x".repeat(1000)), Value::from("1")))
        .collect();
    review["request"]["object"]["metadata"]["annotations"] = Value::Object(annotations);
    let (status, response) = inject(&review, &metrics).await;
    assert_eq!(status, StatusCode::OK);
    assert!(patch_of(&response).is_some(), "injected, with warnings");
    let warnings = response["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), envoy_operator_core::inject::MAX_NOTES);
    assert!(warnings.iter().all(|w| w.as_str().unwrap().len() < 600));
    assert!(warnings.last().unwrap().as_str().unwrap().starts_with("and 993 more unknown"));
}
