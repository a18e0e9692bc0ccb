//! The stream state machine driven by arbitrary bytes, for the fuzz target
//! (`fuzz/fuzz_targets/xds_stream.rs`) and the proptest of the same entry point in the xDS
//! server's tests. Not an API: it exists so the fuzz crate can reach crate-private code.
//!
//! The input's first byte picks the protocol (even: state of the world, odd: delta); the rest
//! is a sequence of steps, each an opcode byte and, for some, a length (`u16`, little-endian)
//! and that many bytes:
//!
//! - `0`, length, bytes: a request, decoded from the bytes as tonic would decode it (bytes
//!   that do not decode end the stream, as they do on the wire);
//! - `1`: the proxy ACKs every response in flight;
//! - `2`, length, bytes: the proxy NACKs every response in flight, the bytes (lossy UTF-8)
//!   being its `error_detail.message`;
//! - `3`, byte: the fleet's snapshot becomes one of two (or none, when the fleet is removed).
//!
//! A request the stream refuses ends it, as a stream task would. After every step the stream
//! must hold no more than its limits allow, and its byte budget must account for every name it
//! holds. Nothing may panic.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use envoy_operator_core::fleet::report::MAX_MESSAGE_CHARS;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::{AggregatedConfigSource, ConfigSource};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use prost::Message;

use super::super::cache::Published;
use super::super::delta::Delta;
use super::super::snapshot::Snapshot;
use super::super::sotw::Sotw;
use super::super::stream::{SUBSCRIPTION_BUDGET, Wire};
use super::super::tracker::Protocol;
use super::{
    ENTRY_OVERHEAD_BYTES, MAX_NAME_BYTES, MAX_SUBSCRIBED_BYTES, MAX_TYPE_URL_BYTES, MAX_TYPES, StreamState,
    SubscriptionBudget, name_cost, type_state_bytes,
};

/// Runs one stream over `input` (see the module's documentation), panicking if the stream
/// breaks a limit or its accounting. Returns why the stream ended before the input did: the
/// request it refused, or one that did not decode.
pub fn run_stream(input: &[u8]) -> Option<String> {
    match input.split_first() {
        Some((protocol, steps)) if protocol % 2 == 0 => run::<Sotw>(steps),
        Some((_, steps)) => run::<Delta>(steps),
        None => None,
    }
}

/// The snapshots a step may switch to: clusters, endpoints, a listener and a route
/// configuration, the second changing one cluster and adding another.
static SNAPSHOTS: LazyLock<[Arc<Snapshot>; 2]> = LazyLock::new(|| {
    let snapshot = |clusters: &[(&str, i64)], listener: &str| {
        let mut builder = Snapshot::builder();
        for (name, timeout) in clusters {
            builder
                .add(&eds_cluster(name, *timeout))
                .add(&ClusterLoadAssignment { cluster_name: (*name).into(), ..Default::default() });
        }
        builder.add_listener(&Listener { name: listener.into(), ..Default::default() }, []);
        builder.add(&RouteConfiguration { name: "routes".into(), ..Default::default() });
        Arc::new(builder.build().expect("a consistent snapshot"))
    };
    [snapshot(&[("a", 1)], "http"), snapshot(&[("a", 2), ("b", 1)], "https")]
});

fn eds_cluster(name: &str, connect_timeout: i64) -> Cluster {
    let ads = ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    };
    Cluster {
        name: name.into(),
        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
            seconds: connect_timeout,
            nanos: 0,
        }),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig { eds_config: Some(ads), service_name: String::new() }),
        ..Default::default()
    }
}

/// What the fuzzer needs of a protocol variant beyond [`Wire`].
trait Fuzzed: Wire<Request: Message + Default> {
    /// The request answering the response in flight for `type_url` with `nonce`.
    fn answer(state: &StreamState, type_url: &str, nonce: &str, error: Option<String>) -> Self::Request;
}

impl Fuzzed for Sotw {
    fn answer(state: &StreamState, type_url: &str, nonce: &str, error: Option<String>) -> DiscoveryRequest {
        // A state-of-the-world request restates the subscription.
        let mut resource_names: Vec<String> = state
            .get(type_url)
            .map(|state| state.names.iter().map(|name| name.to_string()).collect())
            .unwrap_or_default();
        if state.get(type_url).is_some_and(|state| state.wildcard && state.named_explicitly) {
            resource_names.push("*".into());
        }
        DiscoveryRequest {
            type_url: type_url.into(),
            response_nonce: nonce.into(),
            resource_names,
            error_detail: error.map(|message| RpcStatus { code: 3, message, details: Vec::new() }),
            ..Default::default()
        }
    }
}

impl Fuzzed for Delta {
    fn answer(_: &StreamState, type_url: &str, nonce: &str, error: Option<String>) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            type_url: type_url.into(),
            response_nonce: nonce.into(),
            error_detail: error.map(|message| RpcStatus { code: 3, message, details: Vec::new() }),
            ..Default::default()
        }
    }
}

/// Reads steps off the input.
struct Steps<'a>(&'a [u8]);

impl<'a> Steps<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (byte, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*byte)
    }

    /// A length-prefixed chunk, cut short where the input ends.
    fn chunk(&mut self) -> &'a [u8] {
        let length = match (self.byte(), self.byte()) {
            (Some(low), Some(high)) => usize::from(u16::from_le_bytes([low, high])),
            _ => 0,
        };
        let (chunk, rest) = self.0.split_at(length.min(self.0.len()));
        self.0 = rest;
        chunk
    }
}

fn run<W: Fuzzed>(input: &[u8]) -> Option<String> {
    let budget = SubscriptionBudget::new(SUBSCRIPTION_BUDGET);
    let mut state = StreamState::new(W::PROTOCOL, Instant::now(), budget.charge());
    let mut steps = Steps(input);
    while let Some(opcode) = steps.byte() {
        let requests = match opcode % 4 {
            0 => match W::Request::decode(steps.chunk()) {
                Ok(request) => vec![request],
                Err(error) => return Some(format!("undecodable: {error}")),
            },
            1 => answers::<W>(&state, None),
            2 => {
                let message = String::from_utf8_lossy(steps.chunk()).into_owned();
                answers::<W>(&state, Some(message))
            }
            _ => {
                let target = match steps.byte().map(|byte| byte % 3) {
                    Some(0) => Some(SNAPSHOTS[0].clone()),
                    Some(1) => Some(SNAPSHOTS[1].clone()),
                    _ => None,
                };
                state.set_target(target.map(|snapshot| Published { snapshot, set_at: Instant::now() }));
                Vec::new()
            }
        };
        for request in requests {
            match W::apply(&mut state, request) {
                Ok(Some(answer)) => {
                    let error = answer.error.as_deref().unwrap_or_default();
                    assert!(error.chars().count() <= MAX_MESSAGE_CHARS + 32, "a NACK message kept whole");
                }
                Ok(None) => {}
                // The stream ends with the refusal, dropping its state.
                Err(error) => return Some(error.to_string()),
            }
            check_limits(&state, &budget);
        }
        for push in state.plan() {
            drop(W::response(push, None));
        }
        check_limits(&state, &budget);
    }
    None
}

/// The requests answering every response in flight.
fn answers<W: Fuzzed>(state: &StreamState, error: Option<String>) -> Vec<W::Request> {
    state
        .types
        .values()
        .filter_map(|type_state| {
            let nonce = &type_state.in_flight.as_ref()?.nonce;
            Some(W::answer(state, &type_state.type_url, nonce, error.clone()))
        })
        .collect()
}

/// The limits, and the accounting that enforces them: every subscribed name is charged.
fn check_limits(state: &StreamState, budget: &SubscriptionBudget) {
    assert!(state.types.len() <= MAX_TYPES);
    let subscribed = state.subscribed.bytes();
    assert!(subscribed <= MAX_SUBSCRIBED_BYTES);
    assert_eq!(budget.used(), subscribed, "the service's budget holds the stream's share");
    let charged: usize = state.types.values().map(|type_state| type_state.charged).sum();
    assert_eq!(charged, subscribed, "the stream's share is the sum of its types'");
    for type_state in state.types.values() {
        assert!(type_state.type_url.len() <= MAX_TYPE_URL_BYTES);
        assert!(type_state.names.iter().all(|name| name.len() <= MAX_NAME_BYTES));
        let names: usize = type_state.names.iter().map(|name| name_cost(name)).sum();
        assert!(
            names <= type_state.charged,
            "subscribed names take {names} bytes, {} charged",
            type_state.charged
        );
        if state.protocol == Protocol::StateOfTheWorld {
            assert_eq!(
                type_state_bytes(&type_state.type_url) + names,
                type_state.charged,
                "a state-of-the-world type is charged exactly: itself and its names"
            );
        }
        // Held resources are the snapshot's (shared) or reported on the type's first request
        // (charged then); without a wildcard, only subscribed ones.
        if !type_state.wildcard {
            assert!(type_state.held.names().all(|name| type_state.names.contains(name)));
        }
        assert!(type_state.reported_absent.len() <= type_state.names.len());
        assert!(
            type_state.held.names().count() <= type_state.names.len() + subscribed / ENTRY_OVERHEAD_BYTES + 8
        );
    }
}
