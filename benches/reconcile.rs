//! The pure reconcile path for one object: defaults, validation, desired children, the
//! steady-state comparison with the cached children, and the status.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use envoy_operator_core::api::{Envoy, EnvoySpec, Foo, FooSpec, XdsServer};
use envoy_operator_core::children::apply::needs_apply;
use envoy_operator_core::children::{envoy, foo, status};
use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;
use envoy_operator_core::rules::{Rules, defaulted};
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};

fn rolled_out(mut deployment: Deployment) -> Deployment {
    deployment.metadata.uid = Some("uid".into());
    deployment.metadata.generation = Some(1);
    let replicas = deployment.spec.as_ref().and_then(|s| s.replicas);
    deployment.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas,
        updated_replicas: replicas,
        ready_replicas: replicas,
        available_replicas: replicas,
        ..Default::default()
    });
    deployment
}

fn foo() -> Foo {
    let mut foo = Foo::new("example-foo", FooSpec { deployment_name: Some("web".into()), replicas: Some(3) });
    foo.metadata.namespace = Some("ns".into());
    foo.metadata.uid = Some("foo-uid".into());
    foo.metadata.generation = Some(1);
    foo
}

fn envoy() -> Envoy {
    let mut envoy = Envoy::new(
        "edge",
        EnvoySpec {
            xds: Some(XdsServer { name: None, host: "xds-service.default".into(), port: 19000 }),
            ..Default::default()
        },
    );
    envoy.metadata.namespace = Some("ns".into());
    envoy.metadata.uid = Some("envoy-uid".into());
    envoy.metadata.generation = Some(1);
    envoy
}

fn benches(c: &mut Criterion) {
    let now = status::now();

    let parent = foo();
    let cached = rolled_out(foo::desired_deployment(&defaulted(parent.clone()), DEFAULT_NGINX_IMAGE));
    c.bench_function("foo: desired deployment + status", |b| {
        b.iter(|| {
            let defaulted = defaulted(black_box(&parent).clone());
            let _ = defaulted.validate(None);
            let desired = foo::desired_deployment(&defaulted, DEFAULT_NGINX_IMAGE);
            black_box(status::foo_status(&defaulted, foo::selector(&parent), Some(&cached), None, &now));
            black_box(desired)
        })
    });
    c.bench_function("foo: steady-state check (desired vs cached, status)", |b| {
        b.iter(|| {
            let defaulted = defaulted(black_box(&parent).clone());
            let _ = defaulted.validate(None);
            let desired = foo::desired_deployment(&defaulted, DEFAULT_NGINX_IMAGE);
            let changed = needs_apply(&desired, &cached);
            let status = status::foo_status(&defaulted, foo::selector(&parent), Some(&cached), None, &now);
            black_box((changed, parent.status.as_ref() == Some(&status)))
        })
    });

    let xds = envoy_operator_core::bootstrap::XdsTarget {
        cluster_name: "xds_cluster".into(),
        host: "xds-service.default".into(),
        port: 19000,
    };
    c.bench_function("envoy: bootstrap YAML + hash (part of the above)", |b| {
        b.iter(|| {
            let bootstrap = envoy_operator_core::bootstrap::bootstrap(
                envoy_operator_core::bootstrap::Xds::External(black_box(&xds)),
            );
            black_box((bootstrap.to_yaml(), bootstrap.hash()))
        })
    });

    let parent = envoy();
    let children = envoy::desired_children(&defaulted(parent.clone()), None);
    let cached = rolled_out(children.deployment.clone());
    c.bench_function("envoy: desired children + status", |b| {
        b.iter(|| {
            let defaulted = defaulted(black_box(&parent).clone());
            let _ = defaulted.validate(None);
            let children = envoy::desired_children(&defaulted, None);
            let status = status::envoy_status(
                &defaulted,
                envoy::selector(&parent),
                Some(&cached),
                Some(children.config_hash.clone()),
                None,
                &now,
            );
            black_box((children, status))
        })
    });
    c.bench_function("envoy: steady-state check (3 children, status)", |b| {
        b.iter(|| {
            let defaulted = defaulted(black_box(&parent).clone());
            let _ = defaulted.validate(None);
            let desired = envoy::desired_children(&defaulted, None);
            let changed = needs_apply(&desired.config_map, &children.config_map)
                || needs_apply(&desired.deployment, &cached)
                || needs_apply(&desired.service, &children.service);
            black_box(changed)
        })
    });
}

criterion_group!(reconcile, benches);
criterion_main!(reconcile);
