//! Patched (PATCHED.md): a budget of what connections hold while they write, shared by the
//! connections built with it ([`crate::server::with_write_budget`]).
//!
//! A connection holds its write buffer, and what the I/O below it keeps of what it wrote (a
//! TLS session's records), only while a write is under way: the buffer is let go once
//! everything buffered was written and the I/O flushed. A server of many mostly idle
//! connections can then count that for the connections writing at once rather than for
//! every connection: a connection reserves its share before it buffers a frame, waits its
//! turn where the budget is taken, and gives the share back once it has written and flushed
//! everything.
//!
//! Chosen per connection where it is built, not in `Builder`: the servers that need it build
//! their h2 `Builder` inside hyper, where nothing of theirs reaches, and a process may serve
//! other connections that should not draw on it.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// Bytes that connections may hold while they write, all together, and each connection's
/// share of it while it writes.
#[derive(Clone, Debug)]
pub struct WriteBudget {
    shared: Arc<Shared>,
    share: u32,
    writers: usize,
}

#[derive(Debug)]
struct Shared {
    bytes: Arc<Semaphore>,
    waited: AtomicUsize,
}

impl WriteBudget {
    /// `bytes` for writing, of which a connection writing reserves `share`; never less than
    /// one share, so one connection may always write.
    pub fn new(bytes: usize, share: usize) -> Self {
        let share = share.clamp(1, u32::MAX as usize);
        let bytes = bytes.clamp(share, Semaphore::MAX_PERMITS);
        WriteBudget {
            shared: Arc::new(Shared {
                bytes: Arc::new(Semaphore::new(bytes)),
                waited: AtomicUsize::new(0),
            }),
            share: share as u32,
            writers: bytes / share,
        }
    }

    /// Bytes not reserved now.
    pub fn available(&self) -> usize {
        self.shared.bytes.available_permits()
    }

    /// How many connections may write at once.
    pub fn writers(&self) -> usize {
        self.writers
    }

    /// How many times a connection found the budget taken and waited, since it was made.
    pub fn waited(&self) -> usize {
        self.shared.waited.load(Ordering::Relaxed)
    }

    /// One connection's share, taken now if the budget has room and given back when dropped:
    /// the budget as a connection writing would take it (to hold it in a test, say).
    pub fn try_take_share(&self) -> Option<WriteShare> {
        let permit = self.shared.bytes.clone().try_acquire_many_owned(self.share).ok()?;
        Some(WriteShare(Share::new(permit)))
    }
}

/// A share of a [`WriteBudget`], given back when dropped.
#[derive(Debug)]
pub struct WriteShare(#[allow(dead_code)] Share);

/// What connections hold of every budget now, and how many times one waited for its share,
/// for the process: what a server's metrics read.
static HELD: AtomicUsize = AtomicUsize::new(0);
static WAITED: AtomicUsize = AtomicUsize::new(0);

/// Bytes connections hold now of every write budget of the process.
pub(crate) fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// How many times, since the process began, a connection found its write budget taken and
/// waited.
pub(crate) fn waited() -> usize {
    WAITED.load(Ordering::Relaxed)
}

/// A connection's share, while it holds it.
#[derive(Debug)]
struct Share {
    permit: OwnedSemaphorePermit,
}

impl Share {
    fn new(permit: OwnedSemaphorePermit) -> Self {
        HELD.fetch_add(permit.num_permits(), Ordering::Relaxed);
        Share { permit }
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        HELD.fetch_sub(self.permit.num_permits(), Ordering::Relaxed);
    }
}

thread_local! {
    /// The budget of the connections being built on this thread ([`with`]).
    static BUILDING: RefCell<Option<WriteBudget>> = const { RefCell::new(None) };
}

/// Runs `build`, the connections it builds drawing on `budget`.
pub(crate) fn with<R>(budget: &WriteBudget, build: impl FnOnce() -> R) -> R {
    struct Restore(Option<WriteBudget>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            BUILDING.with(|building| *building.borrow_mut() = previous);
        }
    }
    let _restore = Restore(BUILDING.with(|building| building.replace(Some(budget.clone()))));
    build()
}

/// A connection's part: none where it was not built with a budget.
pub(crate) struct Writing {
    budget: WriteBudget,
    state: State,
}

enum State {
    /// Holding nothing: the next frame reserves.
    Idle,
    /// Waiting in turn for the budget.
    Waiting(Pin<Box<dyn Future<Output = Result<OwnedSemaphorePermit, AcquireError>> + Send + Sync>>),
    /// Writing, with its share (given back when dropped).
    Holding(#[allow(dead_code)] Share),
}

impl std::fmt::Debug for Writing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Idle => "idle",
            State::Waiting(_) => "waiting",
            State::Holding(_) => "holding",
        };
        f.debug_struct("Writing").field("share", &self.budget.share).field("state", &state).finish()
    }
}

impl Writing {
    /// The part of a connection being built now, if it is built with a budget.
    pub(crate) fn of_connection_being_built() -> Option<Self> {
        BUILDING.with(|building| building.borrow().clone()).map(|budget| Writing { budget, state: State::Idle })
    }

    /// Ready once the connection holds its share.
    pub(crate) fn poll_reserved(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            match &mut self.state {
                State::Holding(_) => return Poll::Ready(()),
                State::Idle => {
                    let bytes = self.budget.shared.bytes.clone();
                    match bytes.clone().try_acquire_many_owned(self.budget.share) {
                        Ok(permit) => self.state = State::Holding(Share::new(permit)),
                        Err(_) => {
                            self.budget.shared.waited.fetch_add(1, Ordering::Relaxed);
                            WAITED.fetch_add(1, Ordering::Relaxed);
                            self.state = State::Waiting(Box::pin(bytes.acquire_many_owned(self.budget.share)));
                        }
                    }
                }
                State::Waiting(waiting) => match waiting.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(permit)) => self.state = State::Holding(Share::new(permit)),
                    // The semaphore is never closed; were it, writing goes on without it.
                    Poll::Ready(Err(_)) => return Poll::Ready(()),
                },
            }
        }
    }

    /// Everything was written and flushed: the share goes back.
    pub(crate) fn release(&mut self) {
        if let State::Holding(_) = self.state {
            self.state = State::Idle;
        }
    }
}
