//! The control plane's translation of a batch, pure: N EnvoyRoutes on one Envoy
//! (`translate::envoyroute::namespace::translate_namespace`) beside the same N routes as HTTPRoutes on one
//! Gateway (`gateway::translate`), each route with its own hostname and Service of three
//! endpoints. This is the CPU a route change costs the publisher before anything is sent.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use envoy_operator_core::api::gateway::{Gateway, GatewayClass, HTTPRoute};
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::rules::defaulted;
use envoy_operator_core::translate::envoyroute::namespace::{NamespaceInputs, translate_namespace};
use envoy_operator_core::translate::gateway::{GatewayInputs, translate};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const NAMESPACE: &str = "shop";

fn object<K: DeserializeOwned>(value: Value) -> Arc<K> {
    Arc::new(serde_json::from_value(value).expect("a valid object"))
}

fn rules(i: usize) -> Value {
    json!([{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}, {"headers": [{"name": "x-canary", "value": "1"}]}],
        "backendRefs": [{"name": format!("svc-{i}"), "port": 80}]}])
}

fn backends(n: usize) -> (Vec<Arc<Service>>, Vec<Arc<EndpointSlice>>) {
    let services = (0..n)
        .map(|i| {
            object(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": format!("svc-{i}"), "namespace": NAMESPACE},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
        })
        .collect();
    let slices = (0..n)
        .map(|i| {
            object(
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                "metadata": {"name": format!("svc-{i}-a"), "namespace": NAMESPACE,
                    "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": (0..3).map(|e| json!({"addresses": [format!("10.0.{}.{e}", i % 250)],
                    "conditions": {"ready": true}})).collect::<Vec<_>>()}),
            )
        })
        .collect();
    (services, slices)
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("translate");
    for n in [10usize, 100, 1000] {
        let (services, slices) = backends(n);

        let envoys = [defaulted(
            serde_json::from_value::<Envoy>(json!({"apiVersion": "example.com/v1", "kind": "Envoy",
                "metadata": {"name": "edge", "namespace": NAMESPACE},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
            .expect("an Envoy"),
        )];
        let envoy_routes: Vec<Arc<EnvoyRoute>> = (0..n)
            .map(|i| {
                object(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
                    "metadata": {"name": format!("route-{i}"), "namespace": NAMESPACE},
                    "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [format!("h{i}.example.com")],
                        "rules": rules(i)}}))
            })
            .collect();
        group.bench_with_input(BenchmarkId::new("envoyroutes", n), &n, |b, _| {
            b.iter(|| {
                black_box(translate_namespace(&NamespaceInputs {
                    envoys: &envoys,
                    routes: &envoy_routes,
                    services: &services,
                    endpoint_slices: &slices,
                    rejected: envoy_operator_core::fleet::isolate::Rejections::none(),
                }))
            })
        });

        let classes: Vec<Arc<GatewayClass>> = vec![object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "envoy-operator", "generation": 1},
            "spec": {"controllerName": CONTROLLER_NAME}}))];
        let gateways: Vec<Arc<Gateway>> = vec![object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge", "namespace": NAMESPACE, "generation": 1, "uid": "gw-uid"},
            "spec": {"gatewayClassName": "envoy-operator",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}))];
        let http_routes: Vec<Arc<HTTPRoute>> = (0..n)
            .map(|i| {
                object(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                    "metadata": {"name": format!("route-{i}"), "namespace": NAMESPACE, "generation": 1},
                    "spec": {"parentRefs": [{"name": "edge"}], "hostnames": [format!("h{i}.example.com")],
                        "rules": rules(i)}}))
            })
            .collect();
        let inputs = GatewayInputs {
            classes: &classes,
            gateways: &gateways,
            routes: &http_routes,
            services: &services,
            endpoint_slices: &slices,
            ..Default::default()
        };
        let translated = translate(&inputs);
        let served: usize = translated.gateways.iter().map(|g| g.ir.backends.len()).sum();
        assert_eq!(served, n, "every HTTPRoute's backend is served: {translated:?}");
        group.bench_with_input(BenchmarkId::new("httproutes", n), &n, |b, _| {
            b.iter(|| black_box(translate(&inputs)))
        });
    }
    group.finish();
}

criterion_group!(translation, benches);
criterion_main!(translation);
