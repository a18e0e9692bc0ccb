//! What a server's HTTP/2 (`vendor/h2`) holds of request bodies beyond the stream window it
//! advertised: a client may send HTTP/2's default window (65,535 bytes) until it acknowledges
//! a smaller one, and the excess is charged to one budget for the process
//! (`h2::server::set_over_window_budget`), as the xDS server sets it. A stream that finds it
//! spent is reset; a server advertising the default window or more never draws on it.
//!
//! Its own test binary: the budget is the process's.

use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use envoy_operator_testkit::h2_frame::{
    Frames, PREFACE, frame, open_post_stream, setting, unread_bodies_server,
};

/// The window the test's server advertises, under HTTP/2's default as the xDS server's.
const ADVERTISED: u32 = 8 * 1024;
/// Each DATA frame's payload: under HTTP/2's smallest frame limit.
const FRAME_BYTES: usize = 15_000;

async fn send_data(client: &mut TcpStream, frames: usize) {
    for _ in 0..frames {
        client.write_all(&frame(0x0, 0, 1, &[7; FRAME_BYTES])).await.expect("DATA");
    }
}

/// Waits until the budget's use is `expected`; fails with what it is after 10 s.
async fn held_comes_to(expected: usize, what: &str) {
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        while h2::server::over_window_held() != expected {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let held = h2::server::over_window_held();
    assert!(waited.is_ok(), "{what}: the budget holds {held} bytes, not {expected}");
}

/// The budget is the process's: one test at a time sets it.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn serving_xds_sets_the_budget_for_its_memory_limit() {
    use envoy_operator::xds::server::{AdsService, FleetKey, ServeConfig, SnapshotCache, Transport, serve};
    let _alone = ONE_AT_A_TIME.lock().await;
    let limit = 256 << 20;
    let config = ServeConfig::sized_for(Transport::Plaintext, Some(limit));
    assert_eq!(config.server.over_window_budget, 8 << 20, "a thirty-second of the limit");
    let service = AdsService::builder(SnapshotCache::new(), |_: &_, _: Option<std::net::SocketAddr>| {
        Ok(FleetKey::from("fleet"))
    })
    .build();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("its address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, service, config, async move {
        let _ = stopped.await;
    }));
    // Served once a connection gets the server's SETTINGS.
    let mut client = TcpStream::connect(address).await.expect("connected");
    client.write_all(PREFACE).await.expect("the preface");
    client.write_all(&frame(0x4, 0, 0, &[])).await.expect("SETTINGS");
    let (_, settings) =
        Frames::default().next_of(&mut client, |kind, flags, _| kind == 0x4 && flags == 0).await;
    assert_eq!(
        setting(&settings, 0x4),
        Some(envoy_operator::xds::server::STREAM_WINDOW),
        "the xDS server's SETTINGS_INITIAL_WINDOW_SIZE"
    );
    assert_eq!(h2::server::over_window_budget(), 8 << 20, "h2's budget while the xDS server serves");
    assert_eq!(h2::server::over_window_allowance(), 0, "all that xDS streams hold not taken is charged");
    drop(client);
    let _ = stop.send(());
    server.await.expect("the server's task").expect("served");
}

#[tokio::test]
async fn what_a_stream_holds_beyond_the_advertised_window_is_charged_to_the_process_budget() {
    let _alone = ONE_AT_A_TIME.lock().await;
    const BUDGET: usize = 80_000;
    h2::server::set_over_window_budget(BUDGET);
    // Up to the advertised window, a stream holds without drawing on the budget.
    h2::server::set_over_window_allowance(usize::MAX);
    let (address, mut bodies) = unread_bodies_server(Some(ADVERTISED)).await;

    // Four frames not read: 60,000 bytes in one buffer of exactly that, 51,808 over the window.
    let mut first = open_post_stream(address).await;
    let mut first_body = bodies.recv().await.expect("the first request's body");
    send_data(&mut first, 4).await;
    let first_excess = 4 * FRAME_BYTES - ADVERTISED as usize;
    held_comes_to(first_excess, "after 60,000 bytes unread").await;

    // A second stream fits two frames in what is left (21,808 over), not a third (36,808).
    let mut second = open_post_stream(address).await;
    let second_body = bodies.recv().await.expect("the second request's body");
    send_data(&mut second, 3).await;
    let mut frames = Frames::default();
    let (_, reset) = frames.next_of(&mut second, |kind, _, stream| kind == 0x3 && stream == 1).await;
    assert_eq!(reset, 0xbu32.to_be_bytes(), "the second stream's RST_STREAM error code (ENHANCE_YOUR_CALM)");
    assert!(h2::server::over_window_held() <= BUDGET, "the budget was overdrawn");
    assert_eq!(h2::server::over_window_refused(), 1, "streams reset for want of the budget");
    // The operator's metrics read the same figures.
    let mut metrics = envoy_operator::ops::metrics::Metrics::builder();
    metrics.register(envoy_operator::xds::metrics::ControlPlaneMetrics::register);
    let metrics = metrics.build();
    let held_before = h2::server::over_window_held();
    let exposition = metrics.encode();
    let held_after = h2::server::over_window_held();
    assert!(exposition.contains("envoy_operator_xds_over_window_resets_total 1"), "{exposition}");
    let exposed: usize = exposition
        .lines()
        .find_map(|line| line.strip_prefix("envoy_operator_xds_over_window_bytes "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no xds_over_window_bytes sample in\n{exposition}"));
    assert!(
        (held_before.min(held_after)..=held_before.max(held_after)).contains(&exposed),
        "the exposition says {exposed} bytes; h2 held {held_before}, then {held_after}"
    );

    // Taken, the first stream's data is its user's: its charge comes back.
    let taken = first_body.frame().await.expect("a frame").expect("no error").into_data().expect("DATA");
    assert_eq!(taken.len(), 4 * FRAME_BYTES, "what the first read of the body took");
    drop(second_body);
    drop(second);
    held_comes_to(0, "after the first body was taken and the second stream reset and dropped").await;
    drop(first);

    // A server advertising hyper's default window (over HTTP/2's) never draws on it.
    let (address, mut bodies) = unread_bodies_server(None).await;
    let mut third = open_post_stream(address).await;
    let _third_body = bodies.recv().await.expect("the third request's body");
    send_data(&mut third, 4).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(h2::server::over_window_held(), 0, "a server advertising the default window or more");
}

/// With an allowance of 0, as the xDS server sets it, all that a stream holds not taken is the
/// budget's, the part within the advertised window too; taken, it comes back.
#[tokio::test]
async fn with_no_allowance_all_a_stream_holds_not_taken_is_charged() {
    let _alone = ONE_AT_A_TIME.lock().await;
    h2::server::set_over_window_budget(1 << 20);
    h2::server::set_over_window_allowance(0);
    held_comes_to(0, "before any stream").await;
    let (address, mut bodies) = unread_bodies_server(Some(ADVERTISED)).await;
    let mut client = open_post_stream(address).await;
    let mut body = bodies.recv().await.expect("the request's body");
    // Within the advertised window: one frame of 4,000 bytes, all of it charged.
    client.write_all(&frame(0x0, 0, 1, &[7; 4_000])).await.expect("DATA");
    held_comes_to(4_000, "after 4,000 bytes unread").await;
    let taken = body.frame().await.expect("a frame").expect("no error").into_data().expect("DATA");
    assert_eq!(taken.len(), 4_000, "what the read of the body took");
    held_comes_to(0, "once the body was taken").await;
    drop(client);
    h2::server::set_over_window_allowance(usize::MAX);
}
