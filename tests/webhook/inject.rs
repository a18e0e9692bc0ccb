//! The `/inject` endpoint: the injector behind the AdmissionReview contract, over the router.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use envoy_operator::operator::metrics::OperatorMetrics;
use envoy_operator::webhook::inject::{admit_pod, annotation_endpoint, endpoint};
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::review::parse_request;
use envoy_operator::webhook::router::{Limits, Readiness, router, standard_endpoints};
use envoy_operator_core::inject::{InjectConfig, Injector, MAX_WARNING_CHARS, NO_CONFIGURATION, NoEnvoys};
use serde_json::Value;
use tower::ServiceExt;

use crate::common::{patch_of, response_of};

fn pod_fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inject").join(name);
    serde_json::from_slice(&std::fs::read(path).expect("fixture")).expect("JSON")
}

async fn inject(review: &Value, metrics: &OperatorMetrics) -> (StatusCode, Value) {
    post("/inject", review, metrics).await
}

/// A review posted to `path` of the webhook's router, as the API server posts it.
async fn post(path: &str, review: &Value, metrics: &OperatorMetrics) -> (StatusCode, Value) {
    let mut endpoints = standard_endpoints();
    endpoints.push(endpoint(InjectConfig::default(), std::sync::Arc::new(NoEnvoys), metrics.webhook.clone()));
    endpoints.push(annotation_endpoint());
    let app = router(&endpoints, Readiness::default(), Limits::default(), metrics.webhook.clone());
    let request = Request::post(format!("{path}?timeout=5s"))
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
    // It names no Envoy, and the operator has no default xDS server.
    assert_eq!(response["warnings"], serde_json::json!([NO_CONFIGURATION]), "{response}");
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
    assert!(second.get("warnings").is_none(), "nor anything to say: {second}");

    let text = metrics.encode();
    assert!(text.contains("envoy_operator_sidecar_injections_total 1"), "{text}");
    assert!(!text.contains("reason=\"already_injected\""), "the reinvocation is no skip: {text}");
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
    assert_eq!(warnings[0], NO_CONFIGURATION, "what matters most comes first");
    assert_eq!(warnings.last().unwrap(), "and 2 more notes");
}

/// A pod that names no Envoy gets a sidecar without configuration, and is told so, in words
/// `kubectl` prints whole.
#[tokio::test]
async fn a_sidecar_without_configuration_is_a_warning() {
    let metrics = OperatorMetrics::new();
    let (_, response) = inject(&pod_fixture("pod-create-direct-mutate.json"), &metrics).await;
    assert!(patch_of(&response).is_some(), "injected: {response}");
    let warnings: Vec<&str> =
        response["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(warnings, [NO_CONFIGURATION]);
    assert!(warnings[0].len() < MAX_WARNING_CHARS);
    let (_, named) = inject(&pod_fixture("pod-naming-an-envoy.json"), &metrics).await;
    assert_eq!(named["allowed"], false, "no Envoy to name here: denied, not warned: {named}");
}

/// The annotation `sidecar.example.com/inject: "true"` opts nothing in (the label does):
/// the pods the third webhook sends are allowed untouched, with a warning naming the label.
#[tokio::test]
async fn an_opt_in_annotation_is_answered_with_the_label_to_use() {
    let metrics = OperatorMetrics::new();
    let mut review = pod_fixture("pod-create-direct-mutate.json");
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({"sidecar.example.com/inject": "true"});
    let (status, response) = post("/inject_annotation", &review, &metrics).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!((response["allowed"].clone(), patch_of(&response)), (Value::Bool(true), None));
    let warnings: Vec<&str> =
        response["warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        warnings,
        ["sidecar not injected: make sidecar.example.com/inject=true a label of the pod, not an annotation"]
    );
    assert!(warnings[0].len() < MAX_WARNING_CHARS);

    // Anything else the endpoint is sent (an API server without matchConditions would send
    // every unlabelled pod) is allowed untouched and without a word.
    let (_, plain) =
        post("/inject_annotation", &pod_fixture("pod-create-direct-mutate.json"), &metrics).await;
    assert_eq!(plain, serde_json::json!({"uid": review["request"]["uid"], "allowed": true}));
    review["request"]["operation"] = "UPDATE".into();
    review["request"]["oldObject"] = review["request"]["object"].clone();
    let (_, update) = post("/inject_annotation", &review, &metrics).await;
    assert!(update.get("warnings").is_none(), "{update}");
    let text = metrics.encode();
    assert!(
        text.contains(
            "envoy_operator_admission_requests_total{endpoint=\"inject_annotation\",decision=\"allowed\"} 3"
        ),
        "{text}"
    );
}

/// What the log says of an injection and of the reinvocation that follows it: the injection
/// once at INFO, naming the pod, its namespace and its configuration; the reinvocation at
/// DEBUG only, and never as "not injected".
#[test]
fn an_injection_is_logged_once_and_its_reinvocation_is_no_skip() {
    let logs = Captured::default();
    let review = pod_fixture("pod-create-from-replicaset-mutate.json");
    let body = serde_json::to_vec(&review).unwrap();
    let request = parse_request(&body).expect("a review");
    let injector = Injector::new(InjectConfig::default());
    let metrics = WebhookMetrics::default();
    let injected = {
        let _guard = logs.start(tracing::Level::INFO);
        admit_pod(&request, &injector, &NoEnvoys, &metrics)
    };
    let text = logs.take();
    assert_eq!(text.matches("sidecar injected").count(), 1, "{text}");
    let namespace = review["request"]["namespace"].as_str().unwrap();
    assert!(text.contains(&format!("namespace={namespace}")), "{text}");
    assert!(text.contains("pod="), "{text}");
    assert!(text.contains("configuration=none: admin interface only"), "{text}");
    assert!(text.contains(NO_CONFIGURATION), "the warning is logged too: {text}");

    let patch: json_patch::Patch =
        serde_json::from_slice(injected.patch.as_deref().expect("a patch")).unwrap();
    let mut again = review.clone();
    json_patch::patch(&mut again["request"]["object"], &patch).unwrap();
    let body = serde_json::to_vec(&again).unwrap();
    let request = parse_request(&body).expect("a review");
    {
        let _guard = logs.start(tracing::Level::INFO);
        admit_pod(&request, &injector, &NoEnvoys, &metrics);
    }
    assert_eq!(logs.take(), "", "nothing at INFO for a reinvocation");
    {
        let _guard = logs.start(tracing::Level::DEBUG);
        admit_pod(&request, &injector, &NoEnvoys, &metrics);
    }
    let text = logs.take();
    assert!(text.contains("sidecar present already"), "{text}");
    assert!(!text.contains("not injected"), "{text}");
}

/// Log lines written on this thread while a guard of [`Captured::start`] lives.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn start(&self, level: tracing::Level) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(level)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn take(&self) -> String {
        String::from_utf8_lossy(&std::mem::take(&mut *self.0.lock().unwrap())).into_owned()
    }
}
