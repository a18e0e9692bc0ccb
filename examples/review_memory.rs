//! The memory one admission review may cost: the figure the memory budget in README.md
//! ("Memory budget") multiplies by the number of reviews computed at once.
//!
//! ```sh
//! cargo run --release --example review_memory
//! ```
//!
//! Each request shape that an adversary can send within the limits (the 3 MiB body, the JSON
//! value cap) is built, checked against the router's value cap, and answered by the very
//! handler the router runs for its endpoint, in a process of its own whose heap is measured
//! with dhat: the peak above what the process held before, the body itself included.

use std::sync::Arc;

use envoy_operator::webhook::handler;
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::router::{Endpoint, Limits, json_values_exceed, standard_endpoints};
use envoy_operator_core::inject::{InjectConfig, NoEnvoys};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const MIB: f64 = 1024.0 * 1024.0;

/// A review of `object` (of `kind`) as the API server sends it.
fn review(kind: Value, object: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "0d1a2b3c", "kind": kind, "resource": {"group": "", "version": "v1", "resource": "x"},
            "namespace": "shop", "operation": "CREATE", "userInfo": {"username": "mallory"},
            "object": object, "dryRun": true}
    }))
    .unwrap_or_default()
}

fn foo(spec: Value, annotations: Value) -> Vec<u8> {
    review(
        json!({"group": "samplecontroller.k8s.io", "version": "v1alpha1", "kind": "Foo"}),
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
               "metadata": {"name": "x", "namespace": "shop", "annotations": annotations}, "spec": spec}),
    )
}

fn envoy(spec: Value) -> Vec<u8> {
    review(
        json!({"group": "example.com", "version": "v1", "kind": "Envoy"}),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "e", "namespace": "shop"}, "spec": spec}),
    )
}

fn pod(spec: Value, annotations: Value) -> Vec<u8> {
    review(
        json!({"group": "", "version": "v1", "kind": "Pod"}),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-", "annotations": annotations}, "spec": spec}),
    )
}

/// The largest count of an item that keeps the review within both limits.
fn fill(limits: &Limits, build: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let (mut low, mut high) = (1usize, 4_000_000usize);
    while low < high {
        let middle = (low + high).div_ceil(2);
        let body = build(middle);
        if body.len() <= limits.max_body_bytes && !json_values_exceed(&body, limits.max_json_values) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    build(low)
}

/// Every shape: its name, the endpoint, and the body.
fn shapes(limits: &Limits) -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let typical_pod =
        json!({"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]});
    vec![
        ("typical Foo", "/validate", foo(json!({"replicas": 2}), json!({}))),
        ("typical pod", "/inject", pod(typical_pod.clone(), json!({}))),
        (
            "Foo, annotation values at the value cap",
            "/validate",
            fill(limits, |n| {
                foo(json!({}), Value::Object((0..n).map(|i| (format!("k{i}"), json!("v"))).collect()))
            }),
        ),
        (
            "Foo, nested empty arrays at the value cap",
            "/validate",
            fill(limits, |n| foo(json!({"x": vec![json!([]); n]}), json!({}))),
        ),
        (
            "Foo, nested empty arrays at the value cap (mutate)",
            "/mutate",
            fill(limits, |n| foo(json!({"x": vec![json!([]); n]}), json!({}))),
        ),
        (
            "Foo, 48-byte annotations at both limits (mutate)",
            "/mutate",
            fill(limits, |n| {
                foo(
                    json!({}),
                    Value::Object((0..n).map(|i| (format!("k{i}"), json!("x".repeat(48)))).collect()),
                )
            }),
        ),
        (
            "Envoy, bad ports with long names at both limits (mutate)",
            "/mutate",
            fill(limits, |n| {
                let ports: Vec<Value> = (0..n)
                    .map(|i| json!({"name": format!("port-{i}-{}", "x".repeat(40)), "port": 0}))
                    .collect();
                envoy(json!({"ports": ports}))
            }),
        ),
        (
            "Foo, one 3 MiB annotation",
            "/validate",
            fill(limits, |n| foo(json!({}), json!({"a": "x".repeat(n)}))),
        ),
        (
            "Foo, one 3 MiB annotation (mutate)",
            "/mutate",
            fill(limits, |n| foo(json!({}), json!({"a": "x".repeat(n)}))),
        ),
        (
            "Envoy, bad ports at the value cap",
            "/validate",
            fill(limits, |n| {
                envoy(
                    json!({"ports": (0..n).map(|i| json!({"name": format!("p{i}"), "port": 0})).collect::<Vec<_>>()}),
                )
            }),
        ),
        (
            "Envoy, bad ports at the value cap (mutate)",
            "/mutate",
            fill(limits, |n| {
                envoy(
                    json!({"ports": (0..n).map(|i| json!({"name": format!("p{i}"), "port": 0})).collect::<Vec<_>>()}),
                )
            }),
        ),
        (
            "pod, volumes at the limits",
            "/inject",
            fill(limits, |n| {
                let volumes: Vec<Value> = (0..n).map(|i| json!({"name": format!("envoy-tmp-{i}")})).collect();
                pod(json!({"containers": [{"name": "app"}], "volumes": volumes}), json!({}))
            }),
        ),
        (
            "pod, unknown annotations at the limits",
            "/inject",
            fill(limits, |n| {
                let annotations: serde_json::Map<String, Value> =
                    (0..n).map(|i| (format!("sidecar.example.com/typo-{i}"), json!("1"))).collect();
                pod(typical_pod.clone(), Value::Object(annotations))
            }),
        ),
    ]
}

fn endpoints() -> Vec<Endpoint> {
    let mut endpoints = standard_endpoints();
    endpoints.push(envoy_operator::webhook::inject::endpoint(
        InjectConfig::default(),
        Arc::new(NoEnvoys),
        WebhookMetrics::default(),
    ));
    endpoints
}

/// In a child process: builds shape `index`, then measures answering it.
fn measure(index: usize) {
    let limits = Limits::default();
    let (name, path, body) = shapes(&limits).swap_remove(index);
    let endpoints = endpoints();
    let endpoint = endpoints.iter().find(|e| e.path == path).expect("an endpoint");
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get();
    let body = bytes::Bytes::from(body); // what the router holds: the body, read whole
    let answer = handler::review_with(endpoint.admit.as_ref(), endpoint.read, &body)
        .map(|reviewed| reviewed.body.len())
        .unwrap_or(0);
    let after = dhat::HeapStats::get();
    let peak = after.max_bytes.saturating_sub(before.curr_bytes);
    println!(
        "{name:<52} {path:<9} body {:>6.2} MiB  answer {:>6} B  peak {:>6.1} MiB ({:.1}x the body)",
        body.len() as f64 / MIB,
        answer,
        peak as f64 / MIB,
        peak as f64 / body.len() as f64,
    );
}

fn main() {
    if let Some(index) = std::env::args().nth(1).and_then(|arg| arg.parse().ok()) {
        return measure(index);
    }
    let limits = Limits::default();
    println!(
        "limits: body {} MiB, {} JSON values; heap peak of answering one review (dhat)",
        limits.max_body_bytes as f64 / MIB,
        limits.max_json_values
    );
    let count = shapes(&limits).len();
    for index in 0..count {
        let status = std::process::Command::new(std::env::current_exe().expect("this example"))
            .arg(index.to_string())
            .status()
            .expect("a child process");
        assert!(status.success(), "measuring shape {index} failed");
    }
}
