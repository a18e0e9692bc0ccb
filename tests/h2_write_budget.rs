//! What a server's HTTP/2 (`vendor/h2`) holds while it writes, reserved from a budget shared by
//! the connections built with it (`h2::server::with_write_budget`), as the xDS server builds
//! its own: a connection reserves its share before it buffers a frame, waits its turn where
//! the budget is taken, and gives the share back once it has written and flushed everything.
//!
//! The connections run over in-memory pipes of 64 bytes, so a client that does not read
//! stops its connection's writes there, with no socket buffer to take them.
//!
//! Its own test binary: what connections hold of write budgets is counted for the process.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncWriteExt, DuplexStream};

use envoy_operator_testkit::h2_frame::{Frames, PREFACE, frame};

/// A connection's share: the xDS server's.
const SHARE: usize = envoy_operator::xds::server::WRITE_IN_FLIGHT;
/// Each response's body: more than the pipe holds, within HTTP/2's default window.
const BODY_BYTES: usize = 30_000;

/// A client's end of a connection served with `budget` (none: not drawing on one), each
/// request answered with [`BODY_BYTES`].
fn connection(budget: Option<&h2::server::WriteBudget>) -> DuplexStream {
    let (client, server) = tokio::io::duplex(64);
    let service = hyper::service::service_fn(|_| async {
        Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from(vec![7u8; BODY_BYTES]))))
    });
    let builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    let build = || builder.serve_connection(TokioIo::new(server), service);
    let served = match budget {
        Some(budget) => h2::server::with_write_budget(budget, build),
        None => build(),
    };
    tokio::spawn(served);
    client
}

/// Sends the preface, SETTINGS and a request on stream 1, reading nothing.
async fn request(client: &mut DuplexStream) {
    client.write_all(PREFACE).await.expect("the preface");
    client.write_all(&frame(0x4, 0, 0, &[])).await.expect("SETTINGS");
    // POST, http, path "/", ending the stream.
    client.write_all(&frame(0x1, 0x5, 1, &[0x83, 0x86, 0x04, 1, b'/'])).await.expect("HEADERS");
}

/// Reads until stream 1's response ends.
async fn read_response(client: &mut DuplexStream, frames: &mut Frames) {
    frames.next_of(client, |kind, flags, stream| kind == 0x0 && flags & 0x1 != 0 && stream == 1).await;
}

/// Whether stream 1's response headers come within 300 ms.
async fn answered_soon(client: &mut DuplexStream, frames: &mut Frames) -> bool {
    let headers = frames.next_of(client, |kind, _, stream| kind == 0x1 && stream == 1);
    tokio::time::timeout(Duration::from_millis(300), headers).await.is_ok()
}

#[tokio::test]
async fn a_connection_writes_with_its_share_of_the_budget_and_gives_it_back_once_flushed() {
    let budget = h2::server::WriteBudget::new(SHARE + SHARE / 2, SHARE);
    assert_eq!(budget.writers(), 1, "room for one connection writing");

    // The first client reads nothing: its response stops in the pipe, and its connection keeps
    // the share.
    let mut first = connection(Some(&budget));
    request(&mut first).await;
    let held = tokio::time::timeout(Duration::from_secs(5), async {
        while budget.available() >= SHARE {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(held.is_ok(), "the first connection did not reserve its share: {} available", budget.available());

    // The second waits for it, its request unanswered.
    let mut second = connection(Some(&budget));
    let mut second_frames = Frames::default();
    request(&mut second).await;
    assert!(!answered_soon(&mut second, &mut second_frames).await, "answered while the budget was taken");
    assert!(budget.waited() >= 1, "no connection waited");
    // The operator's metrics read the process's figures: the one share held, the wait.
    assert_eq!(h2::server::write_budget_held(), SHARE, "held of the process's write budgets");
    let mut metrics = envoy_operator::ops::metrics::Metrics::builder();
    metrics.register(envoy_operator::xds::metrics::ControlPlaneMetrics::register);
    let exposition = metrics.build().encode();
    assert!(exposition.contains(&format!("envoy_operator_xds_writing_bytes {SHARE}\n")), "{exposition}");
    let waits: usize = exposition
        .lines()
        .find_map(|line| line.strip_prefix("envoy_operator_xds_writing_waits_total "))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no xds_writing_waits sample in\n{exposition}"));
    assert!(waits >= 1, "{exposition}");

    // A connection not built with the budget does not wait on it.
    let mut outside = connection(None);
    request(&mut outside).await;
    assert!(
        answered_soon(&mut outside, &mut Frames::default()).await,
        "a connection without the budget waited"
    );

    // Once the first client reads its response, the second connection writes its own.
    read_response(&mut first, &mut Frames::default()).await;
    assert!(answered_soon(&mut second, &mut second_frames).await, "not answered once the share came back");
    read_response(&mut second, &mut second_frames).await;
    let given_back = tokio::time::timeout(Duration::from_secs(5), async {
        while budget.available() != SHARE + SHARE / 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(given_back.is_ok(), "written and read, the budget has {} available", budget.available());
    assert_eq!(h2::server::write_budget_held(), 0, "held of the process's write budgets");
}
