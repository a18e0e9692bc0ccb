//! Raw HTTP/2 frames, for clients that send what no library client would, and a server for
//! them whose handlers leave request bodies unread.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// What a client sends first on an HTTP/2 connection.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An HTTP/2 frame: its 9-byte header (length, type, flags, stream) and `payload`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).expect("a frame's length fits 24 bits");
    assert!(length < 1 << 24, "a frame's length fits 24 bits");
    let mut frame = length.to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// HTTP/2 frames read from a server, whatever its reads.
#[derive(Default)]
pub struct Frames {
    buffer: Vec<u8>,
}

impl Frames {
    /// The type and payload of the next frame `wanted` accepts (its type, flags and stream),
    /// skipping the others; fails after 10 s or when the server closes.
    pub async fn next_of<R: AsyncRead + Unpin>(
        &mut self,
        server: &mut R,
        wanted: impl Fn(u8, u8, u32) -> bool,
    ) -> (u8, Vec<u8>) {
        let read = async {
            loop {
                while self.buffer.len() >= 9 {
                    let length = usize::from(self.buffer[0]) << 16
                        | usize::from(self.buffer[1]) << 8
                        | usize::from(self.buffer[2]);
                    if self.buffer.len() < 9 + length {
                        break;
                    }
                    let (kind, flags) = (self.buffer[3], self.buffer[4]);
                    let stream =
                        u32::from_be_bytes(self.buffer[5..9].try_into().expect("4 bytes")) & 0x7fff_ffff;
                    let frame: Vec<u8> = self.buffer.drain(..9 + length).collect();
                    if wanted(kind, flags, stream) {
                        return (kind, frame[9..].to_vec());
                    }
                }
                let mut chunk = [0u8; 4096];
                match server.read(&mut chunk).await {
                    Ok(0) | Err(_) => panic!("the server closed the connection before the frame awaited"),
                    Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read).await.expect("the frame awaited within 10 s")
    }
}

/// The value of setting `id` in a SETTINGS frame's `payload`, if it carries it.
pub fn setting(payload: &[u8], id: u16) -> Option<u32> {
    payload
        .chunks(6)
        .find(|setting| setting[..2] == id.to_be_bytes())
        .map(|setting| u32::from_be_bytes(setting[2..].try_into().expect("a setting's value")))
}

/// A connection to `address` with its preface, an empty SETTINGS frame (never acknowledging the
/// server's) and stream 1 opened: POST /, its headers from HPACK's static table and a literal
/// authority.
pub async fn open_post_stream(address: SocketAddr) -> TcpStream {
    let mut client = TcpStream::connect(address).await.expect("connected");
    client.set_nodelay(true).expect("no delay");
    client.write_all(PREFACE).await.expect("the preface");
    client.write_all(&frame(0x4, 0, 0, &[])).await.expect("SETTINGS");
    client.write_all(&frame(0x1, 0x4, 1, &[0x83, 0x86, 0x84, 0x01, 0x01, b'x'])).await.expect("HEADERS");
    client
}

/// A hyper HTTP/2 server on loopback whose handlers hand each request body to the test unread
/// and never answer, advertising `window` for streams and connections (hyper's default where
/// `None`).
pub async fn unread_bodies_server(window: Option<u32>) -> (SocketAddr, mpsc::UnboundedReceiver<Incoming>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let address = listener.local_addr().expect("its address");
    let (bodies, received) = mpsc::unbounded_channel::<Incoming>();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            let bodies = bodies.clone();
            let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                let _ = bodies.send(request.into_body());
                std::future::pending::<Result<hyper::Response<String>, Infallible>>()
            });
            let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
            if let Some(window) = window {
                builder.initial_stream_window_size(window).initial_connection_window_size(window);
            }
            tokio::spawn(builder.serve_connection(TokioIo::new(socket), service));
        }
    });
    (address, received)
}
