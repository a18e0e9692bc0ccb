//! Raw HTTP/2 frames, for clients that send what no library client would.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

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
