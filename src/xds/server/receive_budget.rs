//! One byte budget for every request being received on the xDS port. A gRPC message announces
//! its length in a 5-byte header; the whole length is reserved from the budget when the header
//! arrives, before any of the message is buffered, and given back once the message's last
//! byte is through. A message that cannot be reserved ends its stream with
//! `RESOURCE_EXHAUSTED`. So the memory of half-received messages is bounded by the budget
//! however many connections and streams there are, rather than by streams × the largest
//! message; and since a stream's first request is due within a deadline, a client that stops
//! mid-message holds its reservation for that long at most.
//!
//! Applied to each request's body as the server takes its stream (`connection.rs`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

/// Bytes of requests being received, shared by every stream of a server.
#[derive(Clone, Debug)]
pub struct ReceiveBudget(Arc<Semaphore>);

impl ReceiveBudget {
    pub fn new(bytes: usize) -> Self {
        Self(Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS))))
    }

    /// Bytes not reserved now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }

    /// `body`, its messages charged to this budget.
    pub fn charge<B>(&self, body: B) -> ChargedBody<B> {
        ChargedBody {
            inner: body,
            budget: self.clone(),
            framing: Framing::Header { have: [0; 5], len: 0 },
            held: None,
        }
    }
}

/// Where the body is in gRPC's framing: reading a message header, or inside a message.
#[derive(Debug)]
enum Framing {
    Header { have: [u8; 5], len: usize },
    Message { remaining: usize },
}

/// A request body whose messages are reserved from the budget as their headers arrive.
#[derive(Debug)]
pub struct ChargedBody<B> {
    inner: B,
    budget: ReceiveBudget,
    framing: Framing,
    /// The reservation of the message being received.
    held: Option<OwnedSemaphorePermit>,
}

impl<B> ChargedBody<B> {
    /// Follows the framing through `data`, reserving each message as its header completes.
    fn account(&mut self, mut data: &[u8]) -> Result<(), Status> {
        while !data.is_empty() {
            match &mut self.framing {
                Framing::Header { have, len } => {
                    let take = (5 - *len).min(data.len());
                    have[*len..*len + take].copy_from_slice(&data[..take]);
                    *len += take;
                    data = &data[take..];
                    if *len == 5 {
                        let announced = u32::from_be_bytes([have[1], have[2], have[3], have[4]]) as usize;
                        if announced > 0 {
                            let permits = u32::try_from(announced).unwrap_or(u32::MAX);
                            let permit = self.budget.0.clone().try_acquire_many_owned(permits).map_err(|_| {
                                Status::resource_exhausted(
                                    "the xDS server is receiving all the requests it has room for; retry later",
                                )
                            })?;
                            self.held = Some(permit);
                            self.framing = Framing::Message { remaining: announced };
                        } else {
                            self.framing = Framing::Header { have: [0; 5], len: 0 };
                        }
                    }
                }
                Framing::Message { remaining } => {
                    let take = (*remaining).min(data.len());
                    *remaining -= take;
                    data = &data[take..];
                    if *remaining == 0 {
                        self.held = None;
                        self.framing = Framing::Header { have: [0; 5], len: 0 };
                    }
                }
            }
        }
        Ok(())
    }
}

impl<B> HttpBody for ChargedBody<B>
where
    B: HttpBody<Data = Bytes, Error = Status> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Err(refused) = self.account(data.chunk())
        {
            return Poll::Ready(Some(Err(refused)));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    fn message(len: usize) -> Vec<u8> {
        let mut framed = vec![0u8];
        framed.extend(u32::try_from(len).unwrap().to_be_bytes());
        framed.extend(std::iter::repeat_n(7u8, len));
        framed
    }

    type Chunks = StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Status>>>>;

    fn body(chunks: Vec<Vec<u8>>) -> Chunks {
        StreamBody::new(futures::stream::iter(
            chunks.into_iter().map(|chunk| Ok(Frame::data(Bytes::from(chunk)))).collect::<Vec<_>>(),
        ))
    }

    #[tokio::test]
    async fn a_message_is_reserved_from_its_header_until_its_last_byte() {
        let budget = ReceiveBudget::new(1000);
        let whole = message(600);
        // The header split across chunks, then the message in pieces.
        let chunks =
            vec![whole[..3].to_vec(), whole[3..10].to_vec(), whole[10..300].to_vec(), whole[300..].to_vec()];
        let mut charged = budget.charge(body(chunks));
        let _ = charged.frame().await.unwrap().unwrap();
        assert_eq!(budget.available(), 1000, "a header not yet whole reserves nothing");
        let _ = charged.frame().await.unwrap().unwrap();
        assert_eq!(budget.available(), 400, "the whole announced length, before the message arrives");
        let _ = charged.frame().await.unwrap().unwrap();
        assert_eq!(budget.available(), 400);
        let _ = charged.frame().await.unwrap().unwrap();
        assert_eq!(budget.available(), 1000, "given back with the last byte");
    }

    #[tokio::test]
    async fn a_message_the_budget_has_no_room_for_ends_its_stream() {
        let budget = ReceiveBudget::new(1000);
        let mut first = budget.charge(body(vec![message(800)[..5].to_vec()]));
        let _ = first.frame().await.unwrap().unwrap();
        let mut second = budget.charge(body(vec![message(300)]));
        let refused = second.frame().await.unwrap().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        // A stream that goes away gives its reservation back.
        drop(first);
        let mut third = budget.charge(body(vec![message(300), message(0), message(900)]));
        while let Some(frame) = third.frame().await {
            frame.unwrap();
        }
        assert_eq!(budget.available(), 1000);
    }
}
