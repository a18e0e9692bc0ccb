//! The fuzz target's entry point (`plan::fuzzing::run_stream`) on stable Rust: proptests over
//! request sequences a client could send (long names, many names, NACKs with long messages,
//! snapshot changes) and over arbitrary bytes. The fuzz target mutates the same byte format.

use std::collections::HashMap;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use proptest::collection::{hash_map, vec};
use proptest::prelude::*;
use prost::Message;

use super::plan::fuzzing::run_stream;
use super::plan::{ENTRY_OVERHEAD_BYTES, MAX_NAME_BYTES, MAX_SUBSCRIBED_BYTES};
use super::resource::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// One step of the entry point's input format.
#[derive(Clone, Debug)]
enum Step {
    Request(Vec<u8>),
    AckAll,
    NackAll(String),
    Target(u8),
}

fn encode(delta: bool, steps: &[Step]) -> Vec<u8> {
    let mut input = vec![u8::from(delta)];
    let chunk = |input: &mut Vec<u8>, opcode: u8, bytes: &[u8]| {
        let length = u16::try_from(bytes.len()).expect("a step of at most 64 KiB");
        input.push(opcode);
        input.extend_from_slice(&length.to_le_bytes());
        input.extend_from_slice(bytes);
    };
    for step in steps {
        match step {
            Step::Request(bytes) => chunk(&mut input, 0, bytes),
            Step::AckAll => input.push(1),
            Step::NackAll(message) => chunk(&mut input, 2, message.as_bytes()),
            Step::Target(target) => input.extend_from_slice(&[3, *target]),
        }
    }
    input
}

/// Names the snapshots have, the wildcard, short strangers, and names around the length limit.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        1000 => prop::sample::select(vec!["a", "b", "http", "https", "routes", "*", "", "zz"]).prop_map(String::from),
        1 => (MAX_NAME_BYTES - 1..=MAX_NAME_BYTES + 1).prop_map(|length| "n".repeat(length)),
    ]
}

fn type_url() -> impl Strategy<Value = String> {
    prop_oneof![
        200 => prop::sample::select(vec![CLUSTER, ENDPOINT, LISTENER, ROUTE]).prop_map(String::from),
        1 => Just(String::new()),
        4 => (0..40u8).prop_map(|i| format!("type.googleapis.com/other.{i}")),
        1 => Just(format!("type.googleapis.com/{}", "x".repeat(300))),
    ]
}

fn node() -> impl Strategy<Value = Option<Node>> {
    prop::option::of(Just(Node { id: "pod-0".into(), cluster: "ns/edge".into(), ..Default::default() }))
}

fn nonce() -> impl Strategy<Value = String> {
    (0..6u8).prop_map(|nonce| if nonce == 0 { String::new() } else { nonce.to_string() })
}

fn error_detail() -> impl Strategy<Value = Option<RpcStatus>> {
    prop::option::of((0..4000usize).prop_map(|length| RpcStatus {
        code: 3,
        message: "é".repeat(length),
        details: Vec::new(),
    }))
}

fn sotw_request() -> impl Strategy<Value = Vec<u8>> {
    (node(), type_url(), vec(name(), 0..40), nonce(), error_detail()).prop_map(
        |(node, type_url, resource_names, response_nonce, error_detail)| {
            DiscoveryRequest {
                node,
                type_url,
                resource_names,
                response_nonce,
                error_detail,
                ..Default::default()
            }
            .encode_to_vec()
        },
    )
}

fn delta_request() -> impl Strategy<Value = Vec<u8>> {
    (
        (node(), type_url(), vec(name(), 0..40), vec(name(), 0..8)),
        (hash_map(name(), name(), 0..8), nonce(), error_detail()),
    )
        .prop_map(
            |((node, type_url, subscribe, unsubscribe), (versions, response_nonce, error_detail))| {
                DeltaDiscoveryRequest {
                    node,
                    type_url,
                    resource_names_subscribe: subscribe,
                    resource_names_unsubscribe: unsubscribe,
                    initial_resource_versions: versions,
                    response_nonce,
                    error_detail,
                    ..Default::default()
                }
                .encode_to_vec()
            },
        )
}

fn steps(request: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => request.prop_map(Step::Request),
        2 => Just(Step::AckAll),
        1 => (0..2000usize).prop_map(|length| Step::NackAll("ü".repeat(length))),
        2 => any::<u8>().prop_map(Step::Target),
    ];
    vec(step, 0..60)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn state_of_the_world_requests_stay_within_the_limits(steps in steps(sotw_request().boxed())) {
        run_stream(&encode(false, &steps));
    }

    #[test]
    fn delta_requests_stay_within_the_limits(steps in steps(delta_request().boxed())) {
        run_stream(&encode(true, &steps));
    }

    #[test]
    fn arbitrary_bytes_never_panic(input in vec(any::<u8>(), 0..4096)) {
        run_stream(&input);
    }
}

/// The entry point reaches the budget's refusal (so the proptests' checks cover a full stream).
#[test]
fn the_entry_point_stops_a_stream_at_its_budget() {
    let names_per_request = 60;
    let cost = names_per_request * (1000 + ENTRY_OVERHEAD_BYTES);
    let requests = MAX_SUBSCRIBED_BYTES / cost + 1;
    let steps: Vec<Step> = (0..requests)
        .map(|request| {
            let names = (0..names_per_request).map(|name| format!("{request:0>500}{name:0>500}")).collect();
            let versions = HashMap::new();
            Step::Request(
                DeltaDiscoveryRequest {
                    type_url: ENDPOINT.into(),
                    resource_names_subscribe: names,
                    initial_resource_versions: versions,
                    ..Default::default()
                }
                .encode_to_vec(),
            )
        })
        .collect();
    let ended = run_stream(&encode(true, &steps)).expect("the stream is refused");
    assert!(ended.starts_with("the stream's subscriptions would take"), "{ended}");
}
