//! Backends and clients of the protocols Gateway API's `appProtocol` names, as the suite's echo
//! server and client speak them: an HTTP/2-only server in cleartext (prior knowledge, no
//! upgrade) that answers with its name and the HTTP version it received, an h2c client, and a
//! WebSocket echo server and client (RFC 6455: the handshake and unfragmented frames, enough
//! for the suite's text and binary messages).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long one exchange with the proxy may take.
const PATIENCE: Duration = Duration::from_secs(5);

/// RFC 6455's GUID, appended to the client's key for `Sec-WebSocket-Accept`.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A server on a free port of loopback, stopped when dropped.
pub struct Server {
    pub address: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An HTTP/2-only server in cleartext: an HTTP/1.1 request is a protocol error to it. It
/// answers `<name> <version>` (`infra-backend-v1 HTTP/2.0`).
pub async fn h2c_server(name: &str) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port for the h2c backend");
    let address = listener.local_addr().expect("its address");
    let name = name.to_owned();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let name = name.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<hyper::body::Incoming>| {
                    let body = format!("{name} {:?}", request.version());
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
                });
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Server { address, task }
}

/// A GET of `path` to the proxy's `port` in HTTP/2 with prior knowledge (the suite's
/// `H2CPriorKnowledgeProtocol`): the status and body.
pub async fn h2c_get(port: u16, path: &str) -> Result<(u16, String), String> {
    let exchange = async {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| format!("connect: {e}"))?;
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
        tokio::spawn(connection);
        let request = Request::get(format!("http://127.0.0.1:{port}{path}"))
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(PATIENCE, exchange).await.map_err(|_| "no answer in time".to_owned())?
}

/// A WebSocket server that accepts every upgrade and echoes each message in a frame of the
/// same opcode, until the client closes.
pub async fn websocket_echo_server() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port for the WebSocket backend");
    let address = listener.local_addr().expect("its address");
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = echo_websocket(stream).await;
            });
        }
    });
    Server { address, task }
}

async fn echo_websocket(mut stream: TcpStream) -> Result<(), String> {
    let head = read_head(&mut stream).await?;
    let key = header(&head, "sec-websocket-key").ok_or("no Sec-WebSocket-Key")?;
    let accept = accept_key(&key);
    let response = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    stream.write_all(response.as_bytes()).await.map_err(|e| e.to_string())?;
    loop {
        let (opcode, payload) = read_frame(&mut stream).await?;
        if opcode == OPCODE_CLOSE {
            return Ok(());
        }
        write_frame(&mut stream, opcode, &payload, None).await?;
    }
}

pub const OPCODE_TEXT: u8 = 0x1;
pub const OPCODE_BINARY: u8 = 0x2;
const OPCODE_CLOSE: u8 = 0x8;

/// A client's WebSocket over a connection to the proxy, once the upgrade is answered 101.
pub struct WebSocket {
    stream: TcpStream,
}

impl WebSocket {
    /// The upgrade of `path` on the proxy's `port` with `Host: host` (and the suite's
    /// `Origin`); checks the backend's `Sec-WebSocket-Accept`.
    pub async fn connect(port: u16, host: &str, path: &str) -> Result<Self, String> {
        let connect = async {
            let mut stream =
                TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| format!("connect: {e}"))?;
            let key = base64::engine::general_purpose::STANDARD.encode(rand_bytes());
            let request = format!(
                "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: ws://gateway/websocket\r\n\r\n"
            );
            stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
            let head = read_head(&mut stream).await?;
            let status_line = head.lines().next().unwrap_or_default().to_owned();
            if !status_line.starts_with("HTTP/1.1 101") {
                return Err(format!("upgrade answered {status_line:?}"));
            }
            let accept = header(&head, "sec-websocket-accept");
            if accept.as_deref() != Some(accept_key(&key).as_str()) {
                return Err(format!(
                    "Sec-WebSocket-Accept {accept:?} is not the backend's answer to our key"
                ));
            }
            Ok(WebSocket { stream })
        };
        tokio::time::timeout(PATIENCE, connect).await.map_err(|_| "no upgrade in time".to_owned())?
    }

    /// Sends `payload` in one masked frame of `opcode`, and reads the one frame answering it.
    pub async fn round_trip(&mut self, opcode: u8, payload: &[u8]) -> Result<(u8, Vec<u8>), String> {
        let exchange = async {
            write_frame(&mut self.stream, opcode, payload, Some(rand_bytes()[..4].try_into().unwrap()))
                .await?;
            read_frame(&mut self.stream).await
        };
        tokio::time::timeout(PATIENCE, exchange).await.map_err(|_| "no answer in time".to_owned())?
    }
}

/// `Sec-WebSocket-Accept` for `key`: base64 of the SHA-1 of the key and the GUID.
fn accept_key(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{key}{WEBSOCKET_GUID}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

fn rand_bytes() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).expect("random bytes");
    bytes
}

/// An HTTP/1.1 head, up to the empty line (read a byte at a time: the frames that follow stay
/// in the stream).
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> Result<String, String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err("a head over 16 KiB".to_owned());
        }
        head.push(stream.read_u8().await.map_err(|e| format!("reading the head: {e}"))?);
    }
    String::from_utf8(head).map_err(|e| e.to_string())
}

/// The value of header `name` (case-insensitive) of `head`.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
    })
}

/// One unfragmented frame: its opcode and its payload, unmasked.
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Result<(u8, Vec<u8>), String> {
    let io = |e: std::io::Error| format!("reading a frame: {e}");
    let first = stream.read_u8().await.map_err(io)?;
    let second = stream.read_u8().await.map_err(io)?;
    let length = match second & 0x7f {
        126 => u64::from(stream.read_u16().await.map_err(io)?),
        127 => stream.read_u64().await.map_err(io)?,
        short => u64::from(short),
    };
    if length > 1 << 20 {
        return Err(format!("a frame of {length} bytes"));
    }
    let mask = if second & 0x80 != 0 {
        let mut mask = [0u8; 4];
        stream.read_exact(&mut mask).await.map_err(io)?;
        Some(mask)
    } else {
        None
    };
    let mut payload = vec![0u8; usize::try_from(length).expect("bounded above")];
    stream.read_exact(&mut payload).await.map_err(io)?;
    if let Some(mask) = mask {
        payload.iter_mut().enumerate().for_each(|(i, byte)| *byte ^= mask[i % 4]);
    }
    Ok((first & 0x0f, payload))
}

/// One final frame of `opcode`, masked with `mask` (a client's frames must be).
async fn write_frame(
    stream: &mut (impl AsyncWrite + Unpin),
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> Result<(), String> {
    let mut frame = vec![0x80 | opcode];
    let masked = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        short @ 0..=125 => frame.push(masked | u8::try_from(short).expect("at most 125")),
        medium @ 126..=0xffff => {
            frame.push(masked | 126);
            frame.extend(u16::try_from(medium).expect("at most 0xffff").to_be_bytes());
        }
        long => {
            frame.push(masked | 127);
            frame.extend((long as u64).to_be_bytes());
        }
    }
    match mask {
        Some(mask) => {
            frame.extend(mask);
            frame.extend(payload.iter().enumerate().map(|(i, byte)| byte ^ mask[i % 4]));
        }
        None => frame.extend(payload),
    }
    stream.write_all(&frame).await.map_err(|e| format!("writing a frame: {e}"))
}
