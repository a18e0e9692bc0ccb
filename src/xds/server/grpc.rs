//! The ADS service on the wire: gRPC's framing of both RPCs, done here rather than by the
//! tonic-generated server, so that an idle stream holds no buffer.
//!
//! The generated server decodes and encodes through tonic's `Streaming` and `EncodeBody`,
//! each with a buffer of 8 KiB per stream from its start, and each keeping the capacity of the
//! largest message it ever held for the stream's life: Envoy's first request (61,228 bytes,
//! its node) would leave 64 KiB in every stream's decode buffer, and a large response as much
//! in its encode buffer. Here:
//!
//! - [`Requests`] decodes a message straight from the HTTP/2 frame that carries it whole;
//!   one split across frames is gathered in a buffer of exactly its announced length (the
//!   length [`super::ReceiveBudget`] reserved), freed once it is decoded.
//! - [`ResponseBody`] encodes each response when HTTP/2 asks for the next chunk, into a
//!   buffer of exactly its size that h2 frees once it is written. Until then a queued response
//!   is a [`Push`]: references to the snapshot's resources, shared with every stream.

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use envoy_operator_core::bounded;
use futures::Stream;
use http::HeaderMap;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use prost::Message;
use tonic::Status;
use tonic::server::NamedService;

use super::accept::XdsConnectInfo;
use super::authorizer::Peer;
use super::delta::Delta;
use super::service::{AdsService, ResponseStream};
use super::sotw::Sotw;
use super::stream::Wire;

/// The gRPC service's name, as the generated server has it.
pub const SERVICE_NAME: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
const SOTW_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// gRPC's message header: a compression flag and the length (big-endian u32).
const HEADER_BYTES: usize = 5;

/// The ADS service as [`super::serve`] serves it, or tonic's server (or any tower HTTP
/// server) next to other services.
#[derive(Clone, Debug)]
pub struct AdsGrpc {
    service: AdsService,
}

impl AdsGrpc {
    pub(crate) fn new(service: AdsService) -> Self {
        Self { service }
    }

    /// Answers a stream of the connection `connection` (one of [`super::serve`]'s), or of a
    /// tonic server's (`None`: its address, no identity): the stream runs on, its responses
    /// are the body. Only the path is read of the request's headers, which are dropped here.
    pub(crate) fn respond<B>(
        &self,
        request: http::Request<B>,
        connection: Option<&XdsConnectInfo>,
    ) -> http::Response<tonic::body::Body>
    where
        B: HttpBody<Data = Bytes, Error = Status> + Unpin + Send + 'static,
    {
        let (parts, body) = request.into_parts();
        let open: fn(&Self, B, Peer, Option<&XdsConnectInfo>) -> _ = match parts.uri.path() {
            DELTA_PATH => Self::open::<Delta, B>,
            SOTW_PATH => Self::open::<Sotw, B>,
            _ => return Status::unimplemented("").into_http(),
        };
        let peer = match connection {
            Some(connection) => Peer {
                address: connection.remote_addr,
                identity: connection.identity.as_ref().map(|identity| identity.fleet.clone()),
            },
            None => Peer {
                address: parts
                    .extensions
                    .get::<tonic::transport::server::TcpConnectInfo>()
                    .and_then(|tcp| tcp.remote_addr()),
                identity: None,
            },
        };
        drop(parts);
        let mut response = open(self, body, peer, connection);
        response.headers_mut().insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
        response
    }

    fn open<W: Wire, B>(
        &self,
        body: B,
        peer: Peer,
        connection: Option<&XdsConnectInfo>,
    ) -> http::Response<tonic::body::Body>
    where
        B: HttpBody<Data = Bytes, Error = Status> + Unpin + Send + 'static,
    {
        let requests = Requests::<_, W::Request>::new(body, self.service.max_request_bytes());
        let responses = self.service.open::<W, _>(requests, peer, connection);
        http::Response::new(tonic::body::Body::new(ResponseBody::new(responses)))
    }
}

impl NamedService for AdsGrpc {
    const NAME: &'static str = SERVICE_NAME;
}

impl tower::Service<http::Request<tonic::body::Body>> for AdsGrpc {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        ready(Ok(self.respond(request, None)))
    }
}

/// The messages of a request body. Holds nothing between messages but the bytes of a header
/// not yet whole; a message arriving in pieces is gathered into a buffer of its length.
pub(crate) struct Requests<B, M> {
    body: B,
    max_bytes: usize,
    header: [u8; HEADER_BYTES],
    header_len: usize,
    /// The message being gathered, once its header is read: its announced length, and what
    /// has arrived of it (allocated only when the message spans frames).
    message: Option<(usize, BytesMut)>,
    /// What is left of the frame being read.
    rest: Bytes,
    done: bool,
    _message: PhantomData<fn() -> M>,
}

impl<B, M> Requests<B, M> {
    pub fn new(body: B, max_bytes: usize) -> Self {
        Self {
            body,
            max_bytes,
            header: [0; HEADER_BYTES],
            header_len: 0,
            message: None,
            rest: Bytes::new(),
            done: false,
            _message: PhantomData,
        }
    }
}

impl<B, M: Message + Default> Requests<B, M> {
    /// The next whole message's bytes from `data` (consumed as far as they go).
    fn frame(&mut self, data: &mut Bytes) -> Result<Option<Bytes>, Status> {
        while data.has_remaining() {
            let Some((len, gathered)) = &mut self.message else {
                let take = (HEADER_BYTES - self.header_len).min(data.len());
                self.header[self.header_len..self.header_len + take].copy_from_slice(&data[..take]);
                self.header_len += take;
                data.advance(take);
                if self.header_len == HEADER_BYTES {
                    self.header_len = 0;
                    let len = self.header_read()?;
                    if len == 0 {
                        return Ok(Some(Bytes::new()));
                    }
                    self.message = Some((len, BytesMut::new()));
                }
                continue;
            };
            let len = *len;
            if gathered.is_empty() && data.len() >= len {
                // Whole in this frame: no copy.
                self.message = None;
                return Ok(Some(data.split_to(len)));
            }
            if gathered.capacity() == 0 {
                *gathered = BytesMut::with_capacity(len);
            }
            let take = (len - gathered.len()).min(data.len());
            gathered.put_slice(&data[..take]);
            data.advance(take);
            if gathered.len() == len {
                let gathered = std::mem::take(gathered);
                self.message = None;
                return Ok(Some(gathered.freeze()));
            }
        }
        Ok(None)
    }

    /// The announced length of the message whose header was just read, if acceptable.
    fn header_read(&self) -> Result<usize, Status> {
        match self.header[0] {
            0 => {}
            // https://grpc.github.io/grpc/core/md_doc_compression.html: the server accepts
            // no encoding, so a compressed message is ill-constructed.
            1 => {
                return Err(Status::internal(
                    "protocol error: received message with compressed-flag but no grpc-encoding was specified",
                ));
            }
            flag => {
                return Err(Status::internal(format!(
                    "protocol error: received message with invalid compression flag: {flag} (valid flags are 0 and 1)"
                )));
            }
        }
        let len =
            u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]) as usize;
        if len > self.max_bytes {
            return Err(Status::out_of_range(format!(
                "Error, decoded message length too large: found {len} bytes, the limit is: {} bytes",
                self.max_bytes
            )));
        }
        Ok(len)
    }

    fn fail(&mut self, status: Status) -> Poll<Option<Result<M, Status>>> {
        self.done = true;
        self.message = None;
        self.rest = Bytes::new();
        Poll::Ready(Some(Err(status)))
    }
}

impl<B, M> Stream for Requests<B, M>
where
    B: HttpBody<Data = Bytes, Error = Status> + Unpin,
    M: Message + Default,
{
    type Item = Result<M, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let mut rest = std::mem::take(&mut this.rest);
            match this.frame(&mut rest) {
                Ok(Some(bytes)) => {
                    if rest.has_remaining() {
                        // More of the frame follows the message: a copy of it is kept (a
                        // frame's bytes share h2's read buffer, which must not be held).
                        this.rest = Bytes::copy_from_slice(&rest);
                    }
                    return match M::decode(bytes) {
                        Ok(message) => Poll::Ready(Some(Ok(message))),
                        Err(error) => this.fail(Status::internal(error.to_string())),
                    };
                }
                Ok(None) => {}
                Err(status) => return this.fail(status),
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.rest = data;
                    }
                    // Trailers a client sends end nothing: the body's end does.
                }
                // A client that resets its stream simply left.
                Some(Err(status)) if status.code() == tonic::Code::Cancelled => this.done = true,
                Some(Err(status)) => return this.fail(status),
                None => {
                    this.done = true;
                    if this.header_len > 0 || this.message.is_some() {
                        return this.fail(Status::internal("Unexpected EOF decoding stream."));
                    }
                }
            }
        }
    }
}

/// The responses of a stream as an HTTP body: each encoded when asked for, then the stream's
/// status as trailers.
pub(crate) struct ResponseBody<T> {
    responses: ResponseStream<T>,
    ended: bool,
}

impl<T> ResponseBody<T> {
    pub fn new(responses: ResponseStream<T>) -> Self {
        Self { responses, ended: false }
    }
}

/// `message` framed for gRPC, in a buffer of exactly its size.
pub(crate) fn encode<T: Message>(message: &T) -> Result<Bytes, Status> {
    let len = message.encoded_len();
    let announced = u32::try_from(len)
        .map_err(|_| Status::internal(format!("a response of {len} bytes is too large")))?;
    let mut buffer = BytesMut::with_capacity(HEADER_BYTES + len);
    buffer.put_u8(0);
    buffer.put_u32(announced);
    message.encode(&mut buffer).map_err(|error| Status::internal(error.to_string()))?;
    Ok(buffer.freeze())
}

/// Bytes of a status message sent in a stream's trailers: a message may quote what a client
/// sent (a node id, a type URL), and a connection whose client does not read holds its
/// trailers in h2's write buffer (`serve.rs`'s `WRITING`).
pub(crate) const MAX_STATUS_MESSAGE_BYTES: usize = 1024;

/// The largest trailers frame: its header (9 bytes), `grpc-status`, and `grpc-message`, cut to
/// [`MAX_STATUS_MESSAGE_BYTES`] and its note and percent-encoded (3 bytes a byte at worst),
/// with 64 bytes for HPACK's names and lengths.
pub(crate) const MAX_TRAILERS_FRAME_BYTES: usize =
    9 + 64 + 3 * (MAX_STATUS_MESSAGE_BYTES + bounded::CUT_NOTE_BYTES);

fn trailers(status: &Status) -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    let cut;
    let status = match bounded::truncate_bytes(status.message(), MAX_STATUS_MESSAGE_BYTES) {
        std::borrow::Cow::Borrowed(_) => status,
        std::borrow::Cow::Owned(message) => {
            cut = Status::new(status.code(), message);
            &cut
        }
    };
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, (tonic::Code::Internal as i32).into());
    }
    // Sent never indexed: a message can quote what a client sent, and each one h2 indexed
    // would take a place in the connection's HPACK table. What it may index are the status
    // codes, 17 values.
    for (name, value) in trailers.iter_mut() {
        if name != Status::GRPC_STATUS {
            value.set_sensitive(true);
        }
    }
    trailers
}

impl<T: Message> HttpBody for ResponseBody<T> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let status = match ready!(Pin::new(&mut this.responses).poll_next(cx)) {
            Some(Ok(response)) => match encode(&response) {
                Ok(bytes) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Err(status) => status,
            },
            Some(Err(status)) => status,
            None => Status::ok(""),
        };
        this.ended = true;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(&status)))))
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::Node;
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
    use futures::StreamExt;
    use http_body_util::StreamBody;

    use super::*;

    fn framed(message: &DeltaDiscoveryRequest) -> Vec<u8> {
        encode(message).expect("encodable").to_vec()
    }

    fn request(id: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            node: Some(Node { id: id.into(), ..Default::default() }),
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            ..Default::default()
        }
    }

    type Chunks = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Status>>>>;

    fn requests(chunks: Vec<Vec<u8>>, max_bytes: usize) -> Requests<Chunks, DeltaDiscoveryRequest> {
        let frames: Vec<_> = chunks.into_iter().map(|chunk| Ok(Frame::data(Bytes::from(chunk)))).collect();
        Requests::new(StreamBody::new(futures::stream::iter(frames)), max_bytes)
    }

    #[tokio::test]
    async fn messages_are_read_across_and_within_frames_and_nothing_is_kept_between_them() {
        let (first, second, third) = (framed(&request("a")), framed(&request("b")), framed(&request("c")));
        // The first split in three (its header too), the second and third in one frame.
        let mut both = second.clone();
        both.extend(&third);
        let chunks = vec![first[..3].to_vec(), first[3..20].to_vec(), first[20..].to_vec(), both];
        let mut stream = requests(chunks, 1024);
        let mut read = Vec::new();
        while let Some(message) = stream.next().await {
            read.push(message.expect("a request").node.unwrap().id);
            if read.len() == 1 {
                assert!(stream.message.is_none(), "a message's buffer goes once it is decoded");
            }
        }
        assert_eq!(read, ["a", "b", "c"]);
        assert!(stream.message.is_none() && stream.rest.is_empty() && stream.header_len == 0);
    }

    /// Dropped with the request's head: its headers and extensions.
    #[derive(Clone)]
    struct Head(std::sync::Arc<()>);

    #[tokio::test]
    async fn a_streams_headers_are_dropped_before_it_is_answered() {
        let grpc = AdsGrpc::new(super::super::tests::fixture().service);
        for path in [DELTA_PATH, SOTW_PATH, "/unknown.Service/Method"] {
            let head = Head(std::sync::Arc::new(()));
            let mut request = http::Request::new(tonic::body::Body::empty());
            *request.uri_mut() = path.parse().unwrap();
            request.headers_mut().insert("x-envoy-internal", "true".parse().unwrap());
            request.extensions_mut().insert(head.clone());
            let response = grpc.respond(request, None);
            // `respond` runs where hyper takes the headers (the connection's task): nothing of
            // them may wait for the stream's task.
            assert_eq!(std::sync::Arc::strong_count(&head.0), 1, "{path}: the request's head is still held");
            drop(response);
        }
    }

    #[tokio::test]
    async fn an_empty_message_is_a_default_request() {
        let mut stream = requests(vec![vec![0, 0, 0, 0, 0]], 1024);
        assert_eq!(stream.next().await.unwrap().unwrap(), DeltaDiscoveryRequest::default());
        assert!(stream.next().await.is_none());
    }

    #[tokio::test]
    async fn a_message_over_the_limit_is_refused_from_its_header() {
        let mut header = vec![0u8];
        header.extend(2000u32.to_be_bytes());
        let mut stream = requests(vec![header], 1024);
        let refused = stream.next().await.unwrap().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::OutOfRange);
        assert!(stream.next().await.is_none(), "the stream ends with its error");
    }

    #[tokio::test]
    async fn compressed_and_cut_short_messages_end_the_stream() {
        let mut compressed = framed(&request("a"));
        compressed[0] = 1;
        let refused = requests(vec![compressed], 1024).next().await.unwrap().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Internal);

        let whole = framed(&request("a"));
        let mut cut = requests(vec![whole[..whole.len() - 1].to_vec()], 1024);
        assert_eq!(cut.next().await.unwrap().unwrap_err().code(), tonic::Code::Internal);
        assert!(cut.next().await.is_none());
    }

    #[tokio::test]
    async fn responses_are_framed_in_buffers_of_their_size_then_the_status_as_trailers() {
        let message = request("a");
        let bytes = encode(&message).unwrap();
        assert_eq!(bytes.len(), HEADER_BYTES + message.encoded_len());
        assert_eq!(&bytes[1..5], &(message.encoded_len() as u32).to_be_bytes());
        let status = trailers(&Status::resource_exhausted("full"));
        assert_eq!(status.get("grpc-status").unwrap(), "8");
        assert_eq!(status.get("grpc-message").unwrap(), "full");
        assert_eq!(trailers(&Status::ok("")).get("grpc-status").unwrap(), "0");
    }

    #[test]
    fn a_long_status_message_is_cut_so_the_trailers_fit_their_bound() {
        // Control characters: each is percent-encoded into 3 bytes, the worst case.
        let status = trailers(&Status::invalid_argument("\u{1}".repeat(10_000)));
        let message = status.get("grpc-message").unwrap();
        assert!(message.len() > 3 * MAX_STATUS_MESSAGE_BYTES - 3, "cut, not dropped: {}", message.len());
        let fields: usize = status.iter().map(|(name, value)| name.as_str().len() + value.len()).sum();
        assert!(9 + fields + 16 <= MAX_TRAILERS_FRAME_BYTES, "{fields} bytes of fields");
        assert_eq!(status.get("grpc-status").unwrap(), "3");
    }

    #[test]
    fn only_the_status_code_may_enter_the_clients_hpack_table() {
        let with_details = Status::with_details(tonic::Code::NotFound, "no fleet ns/edge", "details".into());
        let status = trailers(&with_details);
        assert_eq!(status.len(), 3, "{status:?}");
        for (name, value) in &status {
            // h2 never indexes a sensitive value.
            assert_eq!(value.is_sensitive(), name != "grpc-status", "{name}");
        }
    }
}
