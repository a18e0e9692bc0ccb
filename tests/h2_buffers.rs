//! What the server's HTTP/2 (`vendor/h2`) holds of a request body its handler has not read
//! yet, measured with dhat's heap statistics: about the body's size however it was framed.
//! Before, every DATA frame waited on its own, with a slot of the connection's buffer, and
//! with the read buffer it was cut from, 8 KiB, allocated while it waited: the read buffer is
//! let go between reads (`vendor/h2/PATCHED.md`), so a frame in each read kept one of its own.
//!
//! Its own test binary: dhat counts every allocation of the process, and one test at a time.

use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use envoy_operator_testkit::h2_frame::{Frames, frame, open_post_stream, unread_bodies_server};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// DATA frames of 256 bytes (not small enough for h2's budget of small frames to end the
/// connection), each followed by a PING whose ACK is awaited before the next is sent, so that
/// each comes in a read of its own (with its PING at most), however loaded the machine.
const FRAMES: usize = 200;
const FRAME_BYTES: usize = 256;

#[tokio::test]
async fn a_body_not_read_yet_holds_about_its_size_however_it_was_framed() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // Each request's body is handed to the test unread, and its response never comes.
    let (address, mut received) = unread_bodies_server(None).await;
    let mut client = open_post_stream(address).await;
    let body = tokio::time::timeout(Duration::from_secs(10), received.recv())
        .await
        .expect("the handler called")
        .expect("a body");
    // The server's frames are read as the PINGs' ACKs are awaited; the others are skipped.
    let mut from_server = Frames::default();
    ping_round_trip(&mut client, &mut from_server, 0).await;

    let before = dhat::HeapStats::get().curr_bytes;
    for ping in 1..=FRAMES as u64 {
        client.write_all(&frame(0x0, 0, 1, &[0x0a; FRAME_BYTES])).await.expect("DATA");
        ping_round_trip(&mut client, &mut from_server, ping).await;
    }
    let held = dhat::HeapStats::get().curr_bytes.saturating_sub(before);

    let sent = FRAMES * FRAME_BYTES;
    println!("held {held} bytes for {sent} bytes of DATA unread");
    // The body, a buffer's growth (4 KiB) and room for what the runtime and the test allocate
    // meanwhile; a read buffer a frame would be 1.6 MB.
    assert!(
        held < 2 * sent,
        "the server holds {held} bytes more after {FRAMES} DATA frames of {FRAME_BYTES} bytes ({sent} in all) that its handler did not read"
    );
    // All of it came, and waited as one: the handler's first read takes it whole.
    let mut body = body;
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("the body read")
        .expect("a frame")
        .expect("no error");
    let data = first.into_data().expect("DATA");
    assert_eq!(data.len(), sent, "what the handler's first read of the body took");
    drop(client);
}

/// Sends PING `n` and waits for its ACK: the server has read everything sent before it.
async fn ping_round_trip(client: &mut TcpStream, from_server: &mut Frames, n: u64) {
    client.write_all(&frame(0x6, 0, 0, &n.to_be_bytes())).await.expect("PING");
    let (_, payload) = from_server.next_of(client, |kind, flags, _| kind == 0x6 && flags & 0x1 == 0x1).await;
    assert_eq!(payload, n.to_be_bytes(), "the PING ACK's payload");
}
