//! The admission handler path, bytes in to bytes out: parse the AdmissionReview, default,
//! validate, serialize the answer. Typical Foo and Envoy reviews captured from kube-apiserver.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use envoy_operator::webhook::handler::{self, AdmitFn};
use envoy_operator::webhook::review::parse_request;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn handler_path(c: &mut Criterion) {
    let cases: [(&str, AdmitFn, &str); 6] = [
        ("foo/mutate", handler::mutate, "foo-create-mutate.json"),
        ("foo/mutate-with-patch", handler::mutate, "foo-create-sparse-mutate.json"),
        ("foo/validate", handler::validate, "foo-create-validate.json"),
        ("foo/validate-update", handler::validate, "foo-update-validate.json"),
        ("envoy/mutate-with-patch", handler::mutate, "envoy-create-mutate.json"),
        ("envoy/validate", handler::validate, "envoy-create-validate.json"),
    ];
    let mut group = c.benchmark_group("review");
    for (name, admit, file) in cases {
        let body = fixture(file);
        group.throughput(Throughput::Elements(1));
        group.bench_function(name, |b| {
            b.iter(|| handler::review(admit, black_box(&body)).map(|reviewed| reviewed.body.len()))
        });
    }
    group.finish();

    let body = fixture("envoy-create-validate.json");
    c.bench_function("parse/envoy", |b| b.iter(|| parse_request(black_box(&body)).map(|r| r.uid.len())));
}

criterion_group!(benches, handler_path);
criterion_main!(benches);
