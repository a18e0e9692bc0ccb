//! What a client can make a stream hold or wait for: the first request's deadline, NACK
//! messages, resource names and the subscription budget, and requests tonic could not decode.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use envoy_operator_core::fleet::report::MAX_MESSAGE_CHARS;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tonic::{Code, Status};

use super::cache::FleetKey;
use super::metrics::{NoMetrics, XdsMetrics};
use super::plan::{
    ENTRY_OVERHEAD_BYTES, MAX_NAME_BYTES, MAX_SUBSCRIBED_BYTES, MAX_TYPE_URL_BYTES, PlanError, StreamState,
    SubscriptionBudget, type_state_bytes,
};
use super::resource::type_url::{CLUSTER, ENDPOINT, ROUTE};
use super::service::AdsConfig;
use super::stream::NACK_TEXT_NOT_KEPT;
use super::tracker::Protocol;
use super::{
    Client, FLEET, Fixture, fixture, fixture_configured, fixture_with, nack_detail, node, snapshot,
    two_clusters_routing_to,
};

type DeltaEnvoy = Client<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;
type SotwEnvoy = Client<DiscoveryRequest, DiscoveryResponse>;

fn open_delta(fixture: &Fixture) -> DeltaEnvoy {
    Client::open(|requests| fixture.service.open_delta(requests, None))
}

fn open_sotw(fixture: &Fixture) -> SotwEnvoy {
    Client::open(|requests| fixture.service.open_sotw(requests, None))
}

fn hello(type_url: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest { node: node("pod-0", FLEET), type_url: type_url.into(), ..Default::default() }
}

fn subscribe(type_url: &str, names: Vec<String>) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest { type_url: type_url.into(), resource_names_subscribe: names, ..Default::default() }
}

/// `count` distinct names of `length` bytes each, starting with `prefix`.
fn names(prefix: &str, count: usize, length: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i:0>width$}", width = length - prefix.len())).collect()
}

/// The gRPC codes the stream hooks saw, before and after authorization.
#[derive(Default)]
struct Refusals {
    streams: Mutex<Vec<Code>>,
    requests: Mutex<Vec<Code>>,
}

impl XdsMetrics for Refusals {
    fn stream_refused(&self, code: Code) {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner).push(code);
    }

    fn request_refused(&self, _fleet: &FleetKey, code: Code) {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).push(code);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_a_first_request_ends_with_deadline_exceeded() {
    let refusals = Arc::new(Refusals::default());
    let fixture = fixture_with(refusals.clone());
    let mut silent = open_delta(&fixture);
    let status = silent.failure().await;
    assert_eq!(
        (status.code(), status.message()),
        (Code::DeadlineExceeded, "no whole request within 15s of the stream's start")
    );
    silent.assert_ended().await;
    assert_eq!(*refusals.streams.lock().unwrap_or_else(PoisonError::into_inner), [Code::DeadlineExceeded]);
}

/// Log lines written while the guard lives (this thread's, which runs the stream tasks of a
/// current-thread test runtime).
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn start(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

#[tokio::test(start_paused = true)]
async fn a_huge_nack_message_is_cut_before_the_tracker_keeps_it_and_the_log_shows_it() {
    let logs = Captured::default();
    let _guard = logs.start();
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open_delta(&fixture);
    envoy.send(hello(CLUSTER));
    let clusters = envoy.next().await;
    // 4-byte characters: kept in bytes, 256 of them.
    let huge = "😀".repeat(1024 * 1024);
    envoy.send(DeltaDiscoveryRequest {
        type_url: CLUSTER.into(),
        response_nonce: clusters.nonce.clone(),
        error_detail: nack_detail(&huge),
        ..Default::default()
    });
    envoy.assert_silent().await;

    let nack = fixture.tracker.fleet_status(&FleetKey::from(FLEET)).last_nack.expect("a NACK").nack;
    let left_out = huge.len() - MAX_MESSAGE_CHARS;
    assert_eq!(nack.message, format!("{}…({left_out} more bytes)", &huge[..MAX_MESSAGE_CHARS]));
    assert_eq!(nack.message.chars().filter(|c| *c == '😀').count(), MAX_MESSAGE_CHARS / 4);
    let logs = logs.text();
    let nack_lines: Vec<&str> = logs.lines().filter(|line| line.contains("NACK")).collect();
    assert_eq!(nack_lines.len(), 1, "{logs}");
    assert!(nack_lines[0].contains(&format!("({left_out} more bytes)")), "{}", nack_lines[0]);
    assert!(logs.len() < 16 * 1024, "{} bytes of logs", logs.len());
}

#[tokio::test(start_paused = true)]
async fn nack_explanations_share_a_budget_beyond_which_a_nack_is_kept_without_its_text() {
    let config = AdsConfig { nack_budget: 1500, ..AdsConfig::default() };
    let fixture = fixture_configured(Arc::new(NoMetrics), config);
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let nack = |response: &DeltaDiscoveryResponse, explanation: &str| DeltaDiscoveryRequest {
        type_url: CLUSTER.into(),
        response_nonce: response.nonce.clone(),
        error_detail: nack_detail(explanation),
        ..Default::default()
    };
    let kept = |pod: &str| {
        let status = fixture.tracker.fleet_status(&FleetKey::from(FLEET));
        let proxy = status.proxies.iter().find(|proxy| proxy.node_id == pod).expect("the proxy");
        let types = &proxy.types[CLUSTER];
        assert!(types.rejecting, "{pod}'s NACK is recorded");
        types.last_nack.as_ref().expect("a NACK").message.clone()
    };
    let (mut first, mut second) = (open_delta(&fixture), open_delta(&fixture));
    let hello_from = |envoy: &DeltaEnvoy, pod: &str| {
        envoy.send(DeltaDiscoveryRequest { node: node(pod, FLEET), ..hello(CLUSTER) });
    };
    hello_from(&first, "pod-1");
    hello_from(&second, "pod-2");
    let (clusters, others) = (first.next().await, second.next().await);

    first.send(nack(&clusters, &"1".repeat(1000)));
    first.assert_silent().await;
    second.send(nack(&others, &"2".repeat(1000)));
    second.assert_silent().await;
    assert_eq!(kept("pod-1"), "1".repeat(1000));
    assert_eq!(kept("pod-2"), NACK_TEXT_NOT_KEPT, "1,000 bytes more would take the budget over 1,500");

    // A stream's next explanation of a type takes the place of its last.
    fixture.cache.set(FLEET, snapshot(Vec::new(), &[("a", 5), ("b", 2)]));
    let (clusters, others) = (first.next().await, second.next().await);
    first.send(nack(&clusters, &"3".repeat(1020)));
    first.assert_silent().await;
    assert_eq!(kept("pod-1"), "3".repeat(1020));

    // A stream that ends gives its explanations' bytes back.
    first.hang_up();
    for waited in 0.. {
        if fixture.tracker.fleet_status(&FleetKey::from(FLEET)).proxies.len() == 1 {
            break;
        }
        assert!(waited < 1000, "the first stream still recorded 10 s after its client hung up");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    second.send(nack(&others, &"4".repeat(1000)));
    second.assert_silent().await;
    assert_eq!(kept("pod-2"), "4".repeat(1000));
}

#[tokio::test(start_paused = true)]
async fn a_resource_name_over_the_limit_ends_the_stream_with_resource_exhausted() {
    let refusals = Arc::new(Refusals::default());
    let fixture = fixture_with(refusals.clone());
    let mut envoy = open_delta(&fixture);
    envoy.send(hello(CLUSTER));
    envoy.send(subscribe(ENDPOINT, names("ok-", 10, MAX_NAME_BYTES)));
    envoy.send(subscribe(ENDPOINT, names("long-", 1, MAX_NAME_BYTES + 1)));
    let status = envoy.failure().await;
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status.message(),
        format!(
            "a resource name or version of {} bytes in a request of type {ENDPOINT}, over the limit of {MAX_NAME_BYTES}",
            MAX_NAME_BYTES + 1
        )
    );
    envoy.assert_ended().await;
    assert_eq!(*refusals.requests.lock().unwrap_or_else(PoisonError::into_inner), [Code::ResourceExhausted]);
}

#[tokio::test(start_paused = true)]
async fn a_reported_version_over_the_limit_ends_the_stream_with_resource_exhausted() {
    let fixture = fixture();
    let mut envoy = open_delta(&fixture);
    let versions = HashMap::from([("a".to_string(), "v".repeat(MAX_NAME_BYTES + 1))]);
    envoy.send(DeltaDiscoveryRequest { initial_resource_versions: versions, ..hello(CLUSTER) });
    let status = envoy.failure().await;
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert!(status.message().contains(&format!("over the limit of {MAX_NAME_BYTES}")), "{status:?}");
}

#[tokio::test(start_paused = true)]
async fn a_type_url_over_the_limit_ends_the_stream_with_resource_exhausted() {
    let fixture = fixture();
    let mut envoy = open_delta(&fixture);
    envoy.send(hello(CLUSTER));
    let type_url = format!("type.googleapis.com/{}", "x".repeat(MAX_TYPE_URL_BYTES));
    envoy.send(subscribe(&type_url, vec!["a".into()]));
    let status = envoy.failure().await;
    assert_eq!(
        (status.code(), status.message()),
        (
            Code::ResourceExhausted,
            format!("a type URL of {} bytes, over the limit of {MAX_TYPE_URL_BYTES}", type_url.len())
                .as_str()
        )
    );
}

/// 1,000 names of 900 bytes: what one request charges.
const BATCH: usize = 1000 * (900 + ENTRY_OVERHEAD_BYTES);

#[tokio::test(start_paused = true)]
async fn delta_subscriptions_over_the_stream_budget_end_it_with_resource_exhausted() {
    let fixture = fixture();
    let mut envoy = open_delta(&fixture);
    envoy.send(hello(CLUSTER));
    let batches = MAX_SUBSCRIBED_BYTES / BATCH;
    // The budget is the stream's, whatever the types.
    for batch in 0..=batches {
        let type_url = if batch % 2 == 0 { ENDPOINT } else { ROUTE };
        envoy.send(subscribe(type_url, names(&format!("{batch}-"), 1000, 900)));
    }
    let status = envoy.failure().await;
    assert_eq!(status.code(), Code::ResourceExhausted);
    // Each of its 3 types is charged too.
    let types = type_state_bytes(CLUSTER) + type_state_bytes(ENDPOINT) + type_state_bytes(ROUTE);
    let needed = (batches + 1) * BATCH + types;
    assert_eq!(
        status.message(),
        format!(
            "the stream's subscriptions would take {needed} bytes, over the limit of {MAX_SUBSCRIBED_BYTES} \
             (each resource name or reported version counts its length plus {ENTRY_OVERHEAD_BYTES})"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn unsubscribing_gives_the_budget_back() {
    let fixture = fixture();
    let mut envoy = open_delta(&fixture);
    envoy.send(hello(CLUSTER));
    for batch in 0..2 * (MAX_SUBSCRIBED_BYTES / BATCH) {
        let batch = names(&format!("{batch}-"), 1000, 900);
        envoy.send(subscribe(ENDPOINT, batch.clone()));
        envoy.send(DeltaDiscoveryRequest {
            type_url: ENDPOINT.into(),
            resource_names_unsubscribe: batch,
            ..Default::default()
        });
    }
    envoy.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn a_repeated_state_of_the_world_subscription_is_charged_once() {
    let fixture = fixture();
    let mut envoy = open_sotw(&fixture);
    envoy.send(DiscoveryRequest {
        node: node("pod-0", FLEET),
        type_url: CLUSTER.into(),
        ..Default::default()
    });
    let subscription = names("eds-", 3 * (MAX_SUBSCRIBED_BYTES / BATCH) * 1000 / 4, 900);
    for _ in 0..3 {
        envoy.send(DiscoveryRequest {
            type_url: ENDPOINT.into(),
            resource_names: subscription.clone(),
            ..Default::default()
        });
    }
    envoy.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn a_request_tonic_could_not_decode_ends_the_stream_with_its_status() {
    let refusals = Arc::new(Refusals::default());
    let fixture = fixture_with(refusals.clone());
    let undecodable = || Status::internal("failed to decode Protobuf message: invalid wire type value: 7");

    let mut before = open_delta(&fixture);
    before.send_error(undecodable());
    assert_eq!(before.failure().await.code(), Code::Internal);
    before.assert_ended().await;

    let mut after = open_delta(&fixture);
    after.send(hello(CLUSTER));
    after.send_error(undecodable());
    let status = after.failure().await;
    assert_eq!((status.code(), status.message()), (Code::Internal, undecodable().message()));
    after.assert_ended().await;

    assert_eq!(*refusals.streams.lock().unwrap_or_else(PoisonError::into_inner), [Code::Internal]);
    assert_eq!(*refusals.requests.lock().unwrap_or_else(PoisonError::into_inner), [Code::Internal]);
}

#[test]
fn streams_share_the_servers_subscription_budget_and_give_it_back_when_they_end() {
    let budget = SubscriptionBudget::new(3 * BATCH);
    let subscribe = |state: &mut StreamState, prefix: &str| {
        let names = names(prefix, 2000, 900);
        state.type_state(ENDPOINT)?.update_subscription(names, Vec::new(), HashMap::new())
    };
    let mut first = StreamState::new(Protocol::Delta, Instant::now(), budget.charge());
    let mut second = StreamState::new(Protocol::Delta, Instant::now(), budget.charge());
    assert_eq!(subscribe(&mut first, "first-"), Ok(()));
    assert_eq!(
        subscribe(&mut second, "second-"),
        Err(PlanError::ServerSubscriptionsFull { limit: 3 * BATCH })
    );
    // Each stream's type is charged when first requested, whatever its names.
    let endpoints = type_state_bytes(ENDPOINT);
    assert_eq!(budget.used(), 2 * BATCH + 2 * endpoints);
    drop(first);
    assert_eq!(budget.used(), endpoints);
    assert_eq!(subscribe(&mut second, "second-"), Ok(()));
    assert_eq!(budget.used(), 2 * BATCH + endpoints);
}
