//! The admission handler path, bytes in to bytes out: parse the AdmissionReview, default,
//! validate, serialize the answer. Typical Foo and Envoy reviews captured from kube-apiserver.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use envoy_operator::webhook::handler;
use envoy_operator::webhook::review::{AdmissionRequest, AdmissionResponse, parse_request, read_whole};
use envoy_operator_core::kind::AdmittedKind;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// An admission handler (`handler::mutate`, `handler::validate`).
type AdmitFn = fn(&AdmissionRequest) -> AdmissionResponse;

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
            b.iter(|| {
                handler::review_with(admit, read_whole, black_box(&body)).map(|reviewed| reviewed.body.len())
            })
        });
    }
    group.finish();

    // Where the time goes: parsing the review, the rule engine, writing the answer.
    let mut group = c.benchmark_group("breakdown");
    for (name, kind, file) in [
        ("foo", AdmittedKind::Foo, "foo-update-validate.json"),
        ("envoy", AdmittedKind::Envoy, "envoy-create-validate.json"),
    ] {
        let body = fixture(file);
        group.bench_function(format!("{name}/parse"), |b| {
            b.iter(|| parse_request(black_box(&body)).map(|r| r.uid.len()))
        });
        let Ok(request) = parse_request(&body) else { panic!("{file} parses") };
        let object = request.object.clone().unwrap_or_default();
        group.bench_function(format!("{name}/admit"), |b| {
            b.iter(|| kind.admit(black_box(&object), request.old_object.as_ref()).patch.0.len())
        });
        let response = handler::validate(&request);
        group.bench_function(format!("{name}/serialize"), |b| {
            b.iter(|| black_box(&response).to_review_json().len())
        });
    }
    group.finish();
}

criterion_group!(benches, handler_path);
criterion_main!(benches);
