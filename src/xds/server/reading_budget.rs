//! One byte budget for what the transport holds of what clients send while it reads it, all
//! connections together: a TLS record being received, the plaintext of one that h2 has not
//! read, h2's read buffer with a frame in part and a header block it cannot decode yet
//! ([`READ_IN_FLIGHT`] at most). With h2 letting go of its read buffer (vendor/h2), a
//! connection whose reads are at rest holds none of it, and an xDS connection is at rest
//! nearly all its life; counting it per connection would reserve it for every connection.
//!
//! A connection reserves [`READ_IN_FLIGHT`] from the budget before it reads from its socket,
//! and gives it back once its reads are at rest again (nothing of a record, a frame or a header
//! block half-received, nothing decrypted that h2 has not read: `accept.rs`). A connection that
//! finds the budget taken waits, its client's bytes left in the kernel, and one that holds its
//! reservation for [`READ_HOLD_TIMEOUT`] without coming to rest is closed, so clients that
//! stop mid-record cannot keep the others from reading for longer.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use super::serve::READ_IN_FLIGHT;

/// How long a connection may hold its reservation without its reads coming to rest: Envoy's
/// largest request (its first, 61,228 bytes) arrives in milliseconds.
pub const READ_HOLD_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes the transport may hold of what clients send, shared by every connection of a server.
#[derive(Clone, Debug)]
pub struct ReadingBudget {
    bytes: Arc<Semaphore>,
    readers: usize,
    hold_timeout: Duration,
}

/// A connection's reservation on its way.
pub(super) type Reserving = Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send>>;

impl ReadingBudget {
    /// `bytes` for reading, and never less than one connection's reservation.
    pub fn new(bytes: usize) -> Self {
        let bytes = bytes.clamp(READ_IN_FLIGHT, Semaphore::MAX_PERMITS);
        Self {
            bytes: Arc::new(Semaphore::new(bytes)),
            readers: bytes / READ_IN_FLIGHT,
            hold_timeout: READ_HOLD_TIMEOUT,
        }
    }

    /// The same, with connections closed once they hold a reservation for `hold_timeout`
    /// without their reads coming to rest ([`READ_HOLD_TIMEOUT`] otherwise).
    pub fn with_hold_timeout(self, hold_timeout: Duration) -> Self {
        Self { hold_timeout, ..self }
    }

    pub(super) fn hold_timeout(&self) -> Duration {
        self.hold_timeout
    }

    /// Bytes not reserved now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }

    /// How many connections may read at once.
    pub fn readers(&self) -> usize {
        self.readers
    }

    /// One connection's reservation, granted in turn.
    pub(super) fn reserve(&self) -> Reserving {
        Box::pin(self.bytes.clone().acquire_many_owned(READ_IN_FLIGHT as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn readers_beyond_the_budget_wait_in_turn_for_one_to_finish() {
        let budget = ReadingBudget::new(2 * READ_IN_FLIGHT + READ_IN_FLIGHT / 2);
        assert_eq!(budget.readers(), 2);
        let first = budget.reserve().await.unwrap();
        let _second = budget.reserve().await.unwrap();
        let mut third = budget.reserve();
        let mut fourth = budget.reserve();
        assert!(futures::poll!(third.as_mut()).is_pending());
        assert!(futures::poll!(fourth.as_mut()).is_pending());
        drop(first);
        let served = futures::poll!(third.as_mut());
        assert!(matches!(served, std::task::Poll::Ready(Ok(_))), "the first waiting is served first");
        assert!(futures::poll!(fourth.as_mut()).is_pending());
        drop(served);
        assert!(futures::poll!(fourth.as_mut()).is_ready());
    }

    #[test]
    fn a_budget_below_one_reservation_still_lets_one_connection_read() {
        assert_eq!(ReadingBudget::new(0).readers(), 1);
    }
}
