//! Fuzzes the admission endpoints from raw request bytes, as the router runs them after the
//! body is read: the JSON value cap, the AdmissionReview parser, and each endpoint with its own
//! reading of the objects — `/mutate`, `/validate` and the sidecar injector `/inject`.
//!
//! ```sh
//! mkdir -p fuzz/corpus/review && cp tests/fixtures/admission/*.json tests/fixtures/inject/*.json fuzz/corpus/review/
//! cargo +nightly fuzz run review fuzz/corpus/review -- -timeout=1 -runs=1000000
//! ```
//!
//! `-timeout=1` makes any input that takes over a second a finding. Every input must yield a
//! parse error (HTTP 400) or a review that echoes the uid; a patch the injector answers must
//! apply to the pod as sent, and the patched pod must then be left alone. The webhook's fast
//! path (the pod read with only the fields injection looks at, the patch written from the
//! prepared sidecar) must decide and patch exactly as `inject` does on the whole pod.

#![no_main]

use std::sync::{Arc, LazyLock};

use envoy_operator::webhook::handler;
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::review::{ReviewReader, read_whole};
use envoy_operator::webhook::router::{Endpoint, Limits, standard_endpoints};
use envoy_operator_core::inject::{InjectConfig, Injection, Injector, NoEnvoys, SkipReason, inject};
use libfuzzer_sys::fuzz_target;

static ENDPOINTS: LazyLock<Vec<Endpoint>> = LazyLock::new(|| {
    let mut endpoints = standard_endpoints();
    endpoints.push(envoy_operator::webhook::inject::endpoint(
        InjectConfig::default(),
        Arc::new(NoEnvoys),
        WebhookMetrics::default(),
    ));
    endpoints
});

static INJECTOR: LazyLock<Injector> = LazyLock::new(|| Injector::new(InjectConfig::default()));

fuzz_target!(|body: &[u8]| {
    if envoy_operator::webhook::router::json_values_exceed(body, Limits::default().max_json_values) {
        return;
    }
    for endpoint in ENDPOINTS.iter() {
        let read: ReviewReader = endpoint.read;
        let Ok(reviewed) = handler::review_with(endpoint.admit.as_ref(), read, body) else { continue };
        assert_eq!(reviewed.response.uid, reviewed.request.uid);
        assert!(reviewed.body.first() == Some(&b'{') && reviewed.body.last() == Some(&b'}'));
        if endpoint.path == "/inject" {
            let namespace = reviewed.request.namespace.as_deref();
            if let Some(kept) = reviewed.request.object.as_ref() {
                check_fast_path(body, kept, namespace);
            }
            if let Some(patch) = &reviewed.response.patch {
                check_injected(body, patch, namespace);
            }
        }
    }
});

/// The pod of a review `/inject` read, read whole as `inject` needs it. `/inject` skips what
/// injection does not look at, and serde_json does not check the `\u` escapes of the strings
/// it skips for lone surrogates (Go's encoder, the API server's, never writes one): that is
/// the one thing only the whole read may refuse.
fn whole_pod(body: &[u8]) -> Option<serde_json::Value> {
    match envoy_operator::webhook::review::parse_request_with(body, read_whole) {
        Ok(request) => Some(request.object.expect("the object was read once")),
        Err(error) => {
            assert!(error.to_string().contains("surrogate"), "only the whole read refused the review: {error}");
            None
        }
    }
}

/// The injector on the pod as the webhook reads it (`kept`) answers as `inject` on the whole
/// pod: the same decision, summary, error, and patch.
fn check_fast_path(body: &[u8], kept: &serde_json::Value, namespace: Option<&str>) {
    let Some(whole) = whole_pod(body) else { return };
    let fast = INJECTOR.inject_json(kept, namespace, &NoEnvoys);
    match (inject(&whole, namespace, &InjectConfig::default(), &NoEnvoys), fast) {
        (
            Ok(Injection::Patched { patch, summary }),
            Ok(Injection::Patched { patch: json, summary: same }),
        ) => {
            let json: serde_json::Value = serde_json::from_slice(&json).expect("the patch is JSON");
            assert_eq!(json, serde_json::to_value(&patch).expect("a patch serializes"));
            assert_eq!(summary, same);
        }
        (Ok(Injection::Skipped(skip)), Ok(Injection::Skipped(same))) => assert_eq!(skip, same),
        (Err(error), Err(same)) => assert_eq!(error, same),
        (whole, fast) => panic!("inject gave {whole:?}, the webhook's fast path {fast:?}"),
    }
}

/// The patch applies to the whole pod of the review, and a second pass leaves it alone.
fn check_injected(body: &[u8], patch: &[u8], namespace: Option<&str>) {
    let Some(mut pod) = whole_pod(body) else { return };
    let patch: json_patch::Patch = serde_json::from_slice(patch).expect("the patch is a JSON Patch");
    json_patch::patch(&mut pod, &patch).expect("the patch applies to the pod as sent");
    match inject(&pod, namespace, &InjectConfig::default(), &NoEnvoys) {
        Ok(Injection::Skipped(skip)) => assert_eq!(skip.reason, SkipReason::AlreadyInjected),
        other => panic!("a second pass must leave the pod alone, got {other:?}"),
    }
}
