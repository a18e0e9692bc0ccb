//! Raw HTTP/2 frames, for clients that send what no library client would.

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
