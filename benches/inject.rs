//! Sidecar injection speed: a typical pod (the ReplicaSet pod captured from a real API
//! server) and a generated 64 KiB pod (16 containers, 800 env vars: the kind of pod
//! that took older injectors seconds). Each is measured for `inject` alone (the sidecar built
//! per call, as the offline command does), and end to end: parse the pod's JSON, inject,
//! serialize the patch, once with `inject` and once the way the webhook runs it, with an
//! [`Injector`] whose sidecar is built once and written into the patch as prepared JSON, the
//! pod read with only the fields injection looks at. Last, the whole `/inject` handler from
//! review bytes to response bytes (envelope, pod, patch, base64, response).
//!
//! `cargo bench --bench inject`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use envoy_operator::webhook::handler::review_with;
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator_core::inject::pod::read_for_injection;
use envoy_operator_core::inject::{InjectConfig, Injection, Injector, NoEnvoys, inject};
use serde_json::{Value, json};
use std::sync::Arc;

const REPLICASET_REVIEW: &str =
    include_str!("../tests/fixtures/inject/pod-create-from-replicaset-mutate.json");

fn typical_pod() -> Value {
    let review: Value = serde_json::from_str(REPLICASET_REVIEW).expect("fixture parses");
    review["request"]["object"].clone()
}

/// A pod of about 64 KiB of JSON: 16 containers with 50 env vars each, ports, mounts and probes.
fn large_pod() -> Value {
    let containers: Vec<Value> = (0..16)
        .map(|c| {
            let env: Vec<Value> = (0..50)
                .map(|e| json!({"name": format!("SETTING_{c}_{e}_NAME"), "value": format!("value-{c}-{e}-0123456789abcdef")}))
                .collect();
            json!({
                "name": format!("worker-{c}"),
                "image": format!("registry.local/team/worker-{c}:1.{c}.0"),
                "args": ["--listen", format!(":{}", 8000 + c), "--log-format=json"],
                "env": env,
                "ports": [{"name": format!("http-{c}"), "containerPort": 8000 + c, "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8000 + c}, "periodSeconds": 5},
                "volumeMounts": [{"name": "kube-api-access-xmxxw", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"
            })
        })
        .collect();
    let mut pod = typical_pod();
    pod["spec"]["containers"] = Value::Array(containers);
    pod
}

fn bench(c: &mut Criterion) {
    let config = InjectConfig::default();
    let injector = Injector::new(config.clone());
    let mut group = c.benchmark_group("inject");
    for (name, pod) in [("typical-pod", typical_pod()), ("64KiB-pod", large_pod())] {
        let bytes = serde_json::to_vec(&pod).expect("pod serializes");
        assert!(matches!(inject(&pod, Some("shop"), &config, &NoEnvoys), Ok(Injection::Patched { .. })));
        eprintln!("{name}: {} bytes of pod JSON", bytes.len());
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_with_input(BenchmarkId::new("decide+patch", name), &pod, |b, pod| {
            b.iter(|| inject(black_box(pod), Some("shop"), &config, &NoEnvoys))
        });
        group.bench_with_input(BenchmarkId::new("parse+decide+patch+serialize", name), &bytes, |b, bytes| {
            b.iter(|| {
                let pod: Value = serde_json::from_slice(black_box(bytes)).expect("pod parses");
                match inject(&pod, Some("shop"), &config, &NoEnvoys) {
                    Ok(Injection::Patched { patch, .. }) => {
                        serde_json::to_vec(&patch).expect("patch serializes")
                    }
                    _ => Vec::new(),
                }
            })
        });
        group.bench_with_input(
            BenchmarkId::new("webhook:parse+decide+patch-json", name),
            &bytes,
            |b, bytes| {
                b.iter(|| {
                    let pod = read_for_injection(black_box(bytes)).expect("pod parses");
                    match injector.inject_json(&pod, Some("shop"), &NoEnvoys) {
                        Ok(Injection::Patched { patch, .. }) => patch,
                        _ => Vec::new(),
                    }
                })
            },
        );
        let mut review: Value = serde_json::from_str(REPLICASET_REVIEW).expect("fixture parses");
        review["request"]["object"] = pod.clone();
        review["request"]["namespace"] = json!("shop");
        let review = serde_json::to_vec(&review).expect("review serializes");
        let endpoint = envoy_operator::webhook::inject::endpoint(
            config.clone(),
            Arc::new(NoEnvoys),
            WebhookMetrics::default(),
        );
        group.bench_with_input(
            BenchmarkId::new("webhook:review-bytes-to-response-bytes", name),
            &review,
            |b, review| {
                b.iter(|| {
                    let reviewed = review_with(endpoint.admit.as_ref(), endpoint.read, black_box(review))
                        .expect("a review");
                    assert!(reviewed.response.patch.is_some());
                    reviewed.body
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
