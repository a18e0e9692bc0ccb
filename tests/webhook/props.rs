//! Property tests: arbitrary and mutated reviews never panic the webhook, and every answer
//! is well formed (a review echoing the uid, or a 4xx for what is not a review).

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use envoy_operator::webhook::handler;
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::router::{Limits, Readiness, router, standard_endpoints};
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};
use tower::ServiceExt;

use crate::common::{AdmitFn, fixture_json, patch_of, response_of, review_whole};

const FIXTURES: &[&str] = &[
    "foo-create-mutate.json",
    "foo-update-validate.json",
    "foo-delete-validate.json",
    "foo-create-dryrun-validate.json",
    "envoy-create-mutate.json",
    "envoy-update-rename-validate.json",
    "pod-create-from-replicaset-mutate.json",
];

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop_oneof![".{0,12}", "[a-z-]{1,10}", Just("CREATE".to_owned()), Just("Foo".to_owned())]
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z]{1,10}", inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Every JSON pointer in `value`, the root included.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                pointers(child, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

#[derive(Clone, Debug)]
enum Mutation {
    Replace(Index, Value),
    Remove(Index),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), arb_json()).prop_map(|(at, value)| Mutation::Replace(at, value)),
        any::<Index>().prop_map(Mutation::Remove),
    ]
}

/// Applies `mutations` at pointers starting with `focus` (everywhere when empty).
fn mutate_review(mut review: Value, mutations: &[Mutation], focus: &str) -> Value {
    for mutation in mutations {
        let mut all = Vec::new();
        pointers(&review, String::new(), &mut all);
        all.retain(|pointer| pointer.starts_with(focus));
        if all.is_empty() {
            continue;
        }
        match mutation {
            Mutation::Replace(at, value) => {
                if let Some(slot) = review.pointer_mut(&all[at.index(all.len())]) {
                    *slot = value.clone();
                }
            }
            Mutation::Remove(at) => {
                let pointer = &all[at.index(all.len())];
                if let Some((parent, key)) = pointer.rsplit_once('/')
                    && let Some(Value::Object(map)) = review.pointer_mut(parent)
                {
                    map.remove(&key.replace("~1", "/").replace("~0", "~"));
                }
            }
        }
    }
    review
}

/// The handler's answer is a review echoing the uid; a patch applies to the object, and the
/// patched object needs no further patch.
fn check_answer(admit: AdmitFn, body: &[u8]) -> Result<(), TestCaseError> {
    let Ok(reviewed) = review_whole(admit, body) else { return Ok(()) };
    let response = response_of(&reviewed.body);
    prop_assert_eq!(&response["uid"], &Value::String(reviewed.request.uid.clone()));
    prop_assert!(response["allowed"].is_boolean());
    if response["allowed"] == false {
        let code = response["status"]["code"].as_u64();
        prop_assert!(code == Some(400) || code == Some(422), "{}", response);
        prop_assert!(!response["status"]["message"].as_str().unwrap_or("").is_empty());
    }
    if let Some(patch) = patch_of(&response) {
        let original = reviewed.request.object.clone().unwrap_or(Value::Null);
        let mut object = original.clone();
        prop_assert!(json_patch::patch(&mut object, &patch).is_ok(), "the patch applies");
        // Defaulting only adds: every value the object held is still there.
        let mut held = Vec::new();
        pointers(&original, String::new(), &mut held);
        for pointer in held {
            let before = &original.pointer(&pointer);
            if before.is_some_and(|value| !value.is_null() && !value.is_object() && !value.is_array()) {
                prop_assert_eq!(before, &object.pointer(&pointer), "{} changed", pointer);
            }
        }
        let mut again: Value = serde_json::from_slice(body).unwrap();
        again["request"]["object"] = object;
        let second = review_whole(admit, &serde_json::to_vec(&again).unwrap()).unwrap();
        prop_assert!(
            second.response.patch.is_none(),
            "a defaulted object gets no patch: {:?}",
            second.response
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        for admit in [handler::mutate as AdmitFn, handler::validate] {
            check_answer(admit, &body)?;
        }
    }

    #[test]
    fn arbitrary_json_never_panics(value in arb_json()) {
        let body = serde_json::to_vec(&value).unwrap();
        for admit in [handler::mutate as AdmitFn, handler::validate] {
            check_answer(admit, &body)?;
        }
    }

    #[test]
    fn arbitrary_requests_in_a_review_are_answered(request in arb_json(), object in arb_json()) {
        let mut request = request;
        if let Value::Object(map) = &mut request {
            map.insert("object".into(), object);
        }
        let body = serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request,
        })).unwrap();
        for admit in [handler::mutate as AdmitFn, handler::validate] {
            check_answer(admit, &body)?;
        }
    }

    #[test]
    fn mutated_fixture_reviews_are_answered(
        fixture in prop::sample::select(FIXTURES),
        mutations in prop::collection::vec(arb_mutation(), 1..4),
        focus in prop::sample::select(&["", "/request/object/spec", "/request/oldObject/spec", "/request/object/metadata/name", "/request/kind", "/request/operation"][..]),
    ) {
        let review = mutate_review(fixture_json(fixture), &mutations, focus);
        let body = serde_json::to_vec(&review).unwrap();
        for admit in [handler::mutate as AdmitFn, handler::validate] {
            check_answer(admit, &body)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Over HTTP: 200 with a review, or a 4xx with a message; never a 5xx.
    #[test]
    fn the_router_answers_200_or_4xx(
        fixture in prop::sample::select(FIXTURES),
        mutations in prop::collection::vec(arb_mutation(), 0..3),
        truncate in any::<Option<Index>>(),
        path in prop::sample::select(&["/mutate", "/validate", "/mutate?timeout=10s"][..]),
    ) {
        let mut body = serde_json::to_vec(&mutate_review(fixture_json(fixture), &mutations, "")).unwrap();
        if let Some(at) = truncate {
            body.truncate(at.index(body.len()));
        }
        let app = router(&standard_endpoints(), Readiness::default(), Limits::default(), WebhookMetrics::default());
        let request = Request::post(path).header(header::CONTENT_TYPE, "application/json").body(Body::from(body)).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let (status, body) = runtime.block_on(async {
            let response = app.oneshot(request).await.unwrap();
            let status = response.status();
            (status, axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap())
        });
        prop_assert!(status == StatusCode::OK || status == StatusCode::BAD_REQUEST, "{status}");
        if status == StatusCode::OK {
            prop_assert!(response_of(&body)["uid"].is_string());
        } else {
            prop_assert!(!body.is_empty());
        }
    }
}
