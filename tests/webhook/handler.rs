//! The pure handlers on golden AdmissionReviews: request bytes in, response bytes out.

use envoy_operator::webhook::handler;
use envoy_operator::webhook::review::Outcome;
use serde_json::{Value, json};

use crate::common::{AdmitFn, fixture, fixture_json, patch_of, response_of, review_whole};

fn answer(admit: AdmitFn, name: &str) -> (Value, Outcome) {
    let reviewed = review_whole(admit, &fixture(name)).expect("a well-formed review");
    let response = response_of(&reviewed.body);
    assert_eq!(response["uid"], fixture_json(name)["request"]["uid"], "{name}: uid echoed");
    (response, reviewed.response.outcome())
}

fn object_of(name: &str) -> Value {
    fixture_json(name)["request"]["object"].clone()
}

#[test]
fn mutating_a_sparse_foo_adds_defaults_and_keeps_unknown_fields() {
    let (response, outcome) = answer(handler::mutate, "foo-create-sparse-mutate.json");
    assert_eq!(outcome, Outcome::Patched);
    assert_eq!(response["allowed"], true);
    let patch = patch_of(&response).expect("a patch");
    let mut object = object_of("foo-create-sparse-mutate.json");
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(object["spec"], json!({"deploymentName": "example-foo", "replicas": 1}));
    assert_eq!(object["futureField"], json!({"kept": true}));
    assert_eq!(object["metadata"]["labels"], json!({"app.kubernetes.io/name": "shop"}));
}

#[test]
fn mutating_the_seed_envoy_adds_its_defaults_once() {
    let name = "envoy-create-mutate.json";
    let (response, _) = answer(handler::mutate, name);
    let patch = patch_of(&response).expect("the seed leaves image, ports, ... to defaults");
    let mut object = object_of(name);
    json_patch::patch(&mut object, &patch).unwrap();
    assert!(object["spec"]["image"].is_string());
    assert!(object["spec"]["ports"].is_array());
    assert_eq!(object["spec"]["replicas"], 3, "a set value is never changed");

    // Reinvocation: the defaulted object gets no patch.
    let mut review = fixture_json(name);
    review["request"]["object"] = object;
    let reviewed = review_whole(handler::mutate, &serde_json::to_vec(&review).unwrap()).unwrap();
    assert_eq!(response_of(&reviewed.body), json!({"uid": review["request"]["uid"], "allowed": true}));
    assert_eq!(reviewed.response.outcome(), Outcome::Allowed);
}

#[test]
fn the_seed_foo_is_already_defaulted() {
    for name in ["foo-create-mutate.json", "foo-update-mutate.json", "foo-create-dryrun-mutate.json"] {
        let (response, outcome) = answer(handler::mutate, name);
        assert_eq!(outcome, Outcome::Allowed, "{name}");
        assert!(patch_of(&response).is_none(), "{name}");
    }
}

#[test]
fn valid_objects_are_allowed_on_create_update_and_dry_run() {
    for name in [
        "foo-create-validate.json",
        "foo-update-validate.json",
        "foo-create-dryrun-validate.json",
        "envoy-create-validate.json",
    ] {
        let (response, outcome) = answer(handler::validate, name);
        assert_eq!(response["allowed"], true, "{name}: {response}");
        assert_eq!(outcome, Outcome::Allowed, "{name}");
        assert!(response.get("status").is_none(), "{name}");
    }
}

#[test]
fn dry_run_is_answered_like_a_real_request() {
    for (dry, real) in [
        ("foo-create-dryrun-validate.json", "foo-create-validate.json"),
        ("foo-create-dryrun-mutate.json", "foo-create-mutate.json"),
    ] {
        assert_eq!(fixture_json(dry)["request"]["dryRun"], true);
        let admit = if dry.ends_with("mutate.json") { handler::mutate } else { handler::validate };
        let (mut dry_response, _) = answer(admit, dry);
        let (mut real_response, _) = answer(admit, real);
        dry_response["uid"] = Value::Null;
        real_response["uid"] = Value::Null;
        assert_eq!(dry_response, real_response);
    }
}

#[test]
fn an_invalid_foo_is_denied_with_every_field_error() {
    let (response, outcome) = answer(handler::validate, "foo-create-invalid-validate.json");
    assert_eq!(outcome, Outcome::Denied);
    assert_eq!(response["allowed"], false);
    let status = &response["status"];
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "The Foo \"example-foo\" is invalid: \n* spec.deploymentName: Invalid value: \"Example_Foo\""
        ),
        "{message}"
    );
    assert!(
        message.contains("\n* spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        "{message}"
    );
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["spec.deploymentName", "spec.replicas"]);
    assert_eq!(status["details"]["kind"], "Foo");
    assert_eq!(status["details"]["group"], "samplecontroller.k8s.io");
}

#[test]
fn an_envoy_with_xds_port_70000_is_denied() {
    let (response, outcome) = answer(handler::validate, "envoy-create-xds-port-70000-validate.json");
    assert_eq!(outcome, Outcome::Denied);
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("The Envoy \"edge-envoy\" is invalid: spec.xds.port: Invalid value: 70000: "),
        "{message}"
    );
}

#[test]
fn an_envoy_route_is_defaulted_then_judged() {
    let name = "envoyroute-create-mutate.json";
    let (response, outcome) = answer(handler::mutate, name);
    assert_eq!(outcome, Outcome::Patched);
    let mut object = object_of(name);
    json_patch::patch(&mut object, &patch_of(&response).expect("defaults")).unwrap();
    assert_eq!(
        object["spec"]["rules"][0]["backendRefs"][1],
        json!({"group": "", "kind": "Service", "name": "shop-api-canary", "port": 80, "weight": 10})
    );
    let (_, outcome) = answer(handler::validate, name);
    assert_eq!(outcome, Outcome::Allowed, "the same review, validated");

    let (response, outcome) = answer(handler::validate, "envoyroute-create-invalid-validate.json");
    assert_eq!(outcome, Outcome::Denied);
    let status = &response["status"];
    assert_eq!(status["details"]["kind"], "EnvoyRoute");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["spec.rules[0].matches[0].path.value", "spec.rules[0]"]);
    let message = status["message"].as_str().unwrap();
    assert!(message.starts_with("The EnvoyRoute \"shop\" is invalid: \n* spec.rules[0].matches[0].path.value: Invalid value: \"api\""), "{message}");
    assert!(
        message.contains("RequestRedirect filter must not be used together with backendRefs"),
        "{message}"
    );
}

#[test]
fn update_rules_use_the_old_object() {
    let (response, outcome) = answer(handler::validate, "envoy-update-rename-validate.json");
    assert_eq!(outcome, Outcome::Denied, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.name"), "{message}");
    // The same object as a CREATE is fine: only the update rule applies.
    let mut review = fixture_json("envoy-update-rename-validate.json");
    review["request"]["operation"] = json!("CREATE");
    review["request"]["oldObject"] = Value::Null;
    let reviewed = review_whole(handler::validate, &serde_json::to_vec(&review).unwrap()).unwrap();
    assert_eq!(reviewed.response.outcome(), Outcome::Allowed, "{:?}", reviewed.response);
}

#[test]
fn delete_is_allowed_without_a_patch() {
    for admit in [handler::validate as AdmitFn, handler::mutate] {
        let (response, outcome) = answer(admit, "foo-delete-validate.json");
        assert_eq!(outcome, Outcome::Allowed);
        assert_eq!(
            response,
            json!({"uid": fixture_json("foo-delete-validate.json")["request"]["uid"], "allowed": true})
        );
    }
}

#[test]
fn an_unexpected_kind_is_rejected_with_a_clear_message() {
    for admit in [handler::validate as AdmitFn, handler::mutate] {
        let (response, outcome) = answer(admit, "pod-create-direct-mutate.json");
        assert_eq!(outcome, Outcome::Rejected);
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.contains(
                "admits Foo.samplecontroller.k8s.io, Envoy.example.com and EnvoyRoute.example.com;"
            ),
            "{message}"
        );
        assert!(message.contains("Pod.core"), "{message}");
    }
}

#[test]
fn an_unreadable_object_is_rejected_naming_the_field() {
    for (admit, name) in [
        (handler::validate as AdmitFn, "foo-create-unreadable-validate.json"),
        (handler::mutate, "foo-create-unreadable-mutate.json"),
    ] {
        let (response, outcome) = answer(admit, name);
        assert_eq!(outcome, Outcome::Rejected, "{name}");
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        // The API server's words for a type error (issue #11), not the value.
        assert_eq!(
            message,
            "The Foo \"example-foo\" is invalid: spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
        );
    }
}

#[test]
fn warnings_reach_the_user() {
    let mut review = fixture_json("foo-create-validate.json");
    review["request"]["object"]["spec"]["replicas"] = json!(0);
    let reviewed = review_whole(handler::validate, &serde_json::to_vec(&review).unwrap()).unwrap();
    let response = response_of(&reviewed.body);
    assert_eq!(response["allowed"], true);
    assert!(response["warnings"][0].as_str().unwrap().starts_with("spec.replicas: 0"), "{response}");
}

#[test]
fn a_missing_object_on_create_is_rejected_by_validation_and_passed_by_mutation() {
    let mut review = fixture_json("foo-create-validate.json");
    review["request"]["object"] = Value::Null;
    let body = serde_json::to_vec(&review).unwrap();
    assert_eq!(review_whole(handler::validate, &body).unwrap().response.outcome(), Outcome::Rejected);
    assert_eq!(review_whole(handler::mutate, &body).unwrap().response.outcome(), Outcome::Allowed);
}
