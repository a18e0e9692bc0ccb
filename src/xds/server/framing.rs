//! Following what a client sends as it passes through the accept wrapper, without holding it:
//! its TLS records (below rustls) and its HTTP/2 frames (above it). From them the wrapper
//! knows when rustls or h2 holds part of a record, a frame or a header block
//! ([`super::reading_budget`]), and ends a connection whose header block grows over a bound
//! before h2 buffers it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream of length-prefixed frames (TLS records, HTTP/2 frames) followed as it passes:
/// each frame's header is seen whole, whatever the reads.
#[derive(Debug)]
struct Frames<const HEADER: usize> {
    header: [u8; HEADER],
    header_len: usize,
    /// Payload bytes of the current frame not yet seen.
    payload: usize,
}

impl<const HEADER: usize> Frames<HEADER> {
    fn new() -> Self {
        Self { header: [0; HEADER], header_len: 0, payload: 0 }
    }

    /// Follows `data`, the next bytes; `on_header` reads each whole header and says how long
    /// its frame's payload is, or why the stream must end.
    fn follow(
        &mut self,
        mut data: &[u8],
        mut on_header: impl FnMut(&[u8; HEADER]) -> io::Result<usize>,
    ) -> io::Result<()> {
        while !data.is_empty() {
            if self.payload > 0 {
                let n = self.payload.min(data.len());
                self.payload -= n;
                data = &data[n..];
                continue;
            }
            let n = (HEADER - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
            self.header_len += n;
            data = &data[n..];
            if self.header_len == HEADER {
                self.header_len = 0;
                self.payload = on_header(&self.header)?;
            }
        }
        Ok(())
    }

    /// Whether what passed ends with a whole frame.
    fn at_boundary(&self) -> bool {
        self.header_len == 0 && self.payload == 0
    }
}

/// Follows HTTP/2's framing in what a client sends, to end its connection when a header block
/// (a HEADERS frame and its CONTINUATION frames) grows over a bound before h2 holds it: h2
/// keeps what it cannot decode yet of up to 6 frames of a block (16 KiB each) whatever its
/// header list limit, and xDS requests carry a few hundred bytes of headers.
#[derive(Debug)]
pub(super) struct HeaderBlocks {
    limit: usize,
    /// Bytes of the client's connection preface not yet seen.
    preface: usize,
    frames: Frames<9>,
    /// Bytes of the header block being received, if one is.
    block: Option<usize>,
}

impl HeaderBlocks {
    /// The client's preface: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
    const PREFACE: usize = 24;
    const HEADERS: u8 = 0x1;
    const CONTINUATION: u8 = 0x9;
    const END_HEADERS: u8 = 0x4;

    pub(super) fn new(limit: usize) -> Self {
        Self { limit, preface: Self::PREFACE, frames: Frames::new(), block: None }
    }

    /// Follows `data`, the next bytes the client sent; an error once a header block is over
    /// the limit.
    pub(super) fn follow(&mut self, data: &[u8]) -> io::Result<()> {
        let preface = self.preface.min(data.len());
        self.preface -= preface;
        let (limit, block) = (self.limit, &mut self.block);
        self.frames.follow(&data[preface..], |&[l0, l1, l2, kind, flags, ..]| {
            let payload = u32::from_be_bytes([0, l0, l1, l2]) as usize;
            if kind == Self::HEADERS || kind == Self::CONTINUATION {
                let received = block.unwrap_or(0) + payload;
                if received > limit {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a header block of over {limit} bytes"),
                    ));
                }
                *block = (flags & Self::END_HEADERS == 0).then_some(received);
            }
            Ok(payload)
        })
    }

    /// Whether h2 holds nothing of what passed but whole frames, and no header block or
    /// preface in part: once it has read them all, it holds none of the client's bytes
    /// undecoded.
    pub(super) fn at_rest(&self) -> bool {
        (self.preface == 0 || self.preface == Self::PREFACE)
            && self.frames.at_boundary()
            && self.block.is_none()
    }
}

/// A TCP stream whose TLS records are followed as rustls reads them: whether rustls holds part
/// of a record.
#[derive(Debug)]
pub(crate) struct TlsRecords<T> {
    inner: T,
    records: Frames<5>,
}

impl<T> TlsRecords<T> {
    pub(crate) fn new(inner: T) -> Self {
        Self { inner, records: Frames::new() }
    }

    pub(crate) fn get_ref(&self) -> &T {
        &self.inner
    }

    /// Whether what rustls read ends with a whole record (it then holds none in part).
    pub(super) fn at_boundary(&self) -> bool {
        self.records.at_boundary()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TlsRecords<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            // A record's header: content type, version, and the length of what follows.
            this.records.follow(&buf.filled()[before..], |&[_, _, _, l0, l1]| {
                Ok(usize::from(u16::from_be_bytes([l0, l1])))
            })?;
        }
        read
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TlsRecords<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, len: usize) -> Vec<u8> {
        let mut frame = (len as u32).to_be_bytes()[1..].to_vec();
        frame.extend([kind, flags, 0, 0, 0, 1]);
        frame.resize(9 + len, 0x55);
        frame
    }

    fn client(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        for frame in frames {
            bytes.extend(frame);
        }
        bytes
    }

    #[test]
    fn header_blocks_within_the_limit_pass_whatever_the_reads() {
        let bytes = client(&[
            frame(0x4, 0, 18),     // SETTINGS
            frame(0x1, 0x4, 300),  // HEADERS, END_HEADERS
            frame(0x0, 0, 16_000), // DATA
            frame(0x1, 0, 4000),   // HEADERS...
            frame(0x9, 0x4, 4000), // ...and a CONTINUATION ending it: 8,000 bytes
            frame(0x1, 0x4, 8000),
        ]);
        let mut whole = HeaderBlocks::new(8192);
        whole.follow(&bytes).unwrap();
        assert!(whole.at_rest());
        let mut bytewise = HeaderBlocks::new(8192);
        for byte in &bytes {
            bytewise.follow(std::slice::from_ref(byte)).unwrap();
        }
        assert!(bytewise.at_rest());
    }

    #[test]
    fn a_header_block_over_the_limit_ends_the_connection_before_it_is_all_sent() {
        let bytes = client(&[frame(0x1, 0, 4000), frame(0x9, 0, 4000), frame(0x9, 0x4, 4000)]);
        let mut blocks = HeaderBlocks::new(8192);
        // The third frame's header announces it: refused before its payload.
        let third = 24 + 2 * (9 + 4000) + 9;
        blocks.follow(&bytes[..third - 1]).unwrap();
        let refused = blocks.follow(&bytes[third - 1..third]).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn h2_is_at_rest_only_between_whole_frames_outside_a_header_block() {
        let bytes =
            client(&[frame(0x4, 0, 18), frame(0x1, 0, 100), frame(0x9, 0x4, 50), frame(0x0, 0, 1000)]);
        let ends: Vec<usize> = [24, 24 + 27, 24 + 27 + 109, 24 + 27 + 109 + 59, bytes.len()].into();
        let mut blocks = HeaderBlocks::new(8192);
        let mut at_rest = Vec::new();
        for (n, byte) in bytes.iter().enumerate() {
            blocks.follow(std::slice::from_ref(byte)).unwrap();
            if blocks.at_rest() {
                at_rest.push(n + 1);
            }
        }
        // After the preface and each whole frame, but not within one, nor between a HEADERS
        // frame and the CONTINUATION that ends its block.
        assert_eq!(at_rest, [ends[0], ends[1], ends[3], ends[4]]);
        assert!(HeaderBlocks::new(8192).at_rest(), "nothing sent");
        let mut half_a_preface = HeaderBlocks::new(8192);
        half_a_preface.follow(b"PRI * HTTP").unwrap();
        assert!(!half_a_preface.at_rest());
        // An empty HEADERS frame without END_HEADERS still opens a block.
        let mut empty = HeaderBlocks::new(8192);
        empty.follow(&client(&[frame(0x1, 0, 0)])).unwrap();
        assert!(!empty.at_rest());
    }

    #[tokio::test]
    async fn tls_records_are_followed_whatever_the_reads() {
        use tokio::io::AsyncReadExt;
        // Two records (a handshake record, 40 bytes; application data, 300), then half a
        // third's header.
        let mut bytes = vec![0x16, 0x03, 0x01, 0, 40];
        bytes.resize(5 + 40, 0xaa);
        bytes.extend([0x17, 0x03, 0x03, 0x01, 0x2c]);
        bytes.resize(bytes.len() + 300, 0xbb);
        let whole = bytes.len();
        bytes.extend([0x17, 0x03]);
        let mut at_boundary = Vec::new();
        let mut records = TlsRecords::new(&bytes[..]);
        let mut byte = [0u8; 1];
        let mut read = 0;
        while records.read(&mut byte).await.unwrap() == 1 {
            read += 1;
            if records.at_boundary() {
                at_boundary.push(read);
            }
        }
        assert_eq!(at_boundary, [45, whole]);
        assert!(!records.at_boundary(), "half a header read");
    }
}
