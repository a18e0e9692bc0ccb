//! What one connection is doing: requests (or gRPC streams) in flight, since when it is idle,
//! request heads arriving, writes blocked. Shared by the connection's I/O, its requests and
//! its supervisor, and read by the accept loop when it makes room at the cap. The webhook,
//! operations and xDS ports all keep it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::Waker;
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::deadlines::{CLOSE_GRACE, Closed, Policy};
use super::slots::{HOARDING, Vacancy, VacancyKind};

/// What a connection is doing, shared by its I/O (bytes arriving), its requests (begun and
/// answered) and its supervisor, and read by the accept loop making room at the cap. Times
/// are milliseconds since `epoch`.
#[derive(Debug)]
pub(crate) struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the last request ended (or the connection opened).
    idle_since: AtomicU64,
    /// When the first byte of a request head arrived; [`NEVER`] when none is pending.
    reading_since: AtomicU64,
    /// Whether any request has begun.
    served: AtomicBool,
    /// Serving HTTP/1.1 (not yet during the handshake): bytes arriving on an idle connection
    /// start a request head (HTTP/2 connections carry pings and window updates while idle),
    /// and closing an idle one may race a request.
    http1: AtomicBool,
    /// HTTP/1.1: the time a request head may take, in milliseconds.
    head_limit: AtomicU64,
    /// When the supervisor looks next; a head begun now that must be cut sooner wakes it.
    wake_at: AtomicU64,
    /// Answers say `Connection: close` (the server is draining).
    closing: AtomicBool,
    /// A write waits on the client to read; [`Monitored`] sets it only when a write blocks.
    write_blocked: AtomicBool,
    /// When a blocked write last went through; [`NEVER`] before.
    write_resumed: AtomicU64,
    /// Asked to close to make room, until it ends or declines.
    pub(super) evicting: AtomicBool,
    /// Wakes the supervisor (or the handshake) when asked to close to make room.
    pub(super) eviction: Notify,
    /// Wakes the supervisor when a request head begins that must be cut before it would
    /// look next: about once per header allowance at most, not once per request.
    pub(super) head_begun: Notify,
    /// Woken when the last request in flight ends: a reader that closes the connection once
    /// it idles (the xDS port's) starts its timer then.
    idle_waker: AtomicWaker,
}

/// A time that has not come: no request head pending, no blocked write yet.
const NEVER: u64 = u64::MAX;

impl Activity {
    pub(crate) fn new() -> Self {
        Self {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            reading_since: AtomicU64::new(NEVER),
            served: AtomicBool::new(false),
            http1: AtomicBool::new(false),
            head_limit: AtomicU64::new(NEVER),
            wake_at: AtomicU64::new(NEVER),
            closing: AtomicBool::new(false),
            write_blocked: AtomicBool::new(false),
            write_resumed: AtomicU64::new(NEVER),
            evicting: AtomicBool::new(false),
            eviction: Notify::new(),
            head_begun: Notify::new(),
            idle_waker: AtomicWaker::new(),
        }
    }

    pub(super) fn close_after_next_response(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    fn at(&self, millis: u64) -> Instant {
        self.epoch + Duration::from_millis(millis)
    }

    /// Serving HTTP/1.1, whose request heads must arrive within `head_limit`.
    pub(super) fn serving_http1(&self, head_limit: Duration) {
        let millis = u64::try_from(head_limit.as_millis()).unwrap_or(NEVER);
        self.head_limit.store(millis, Ordering::Relaxed);
        self.http1.store(true, Ordering::Relaxed);
    }

    /// The supervisor looks next at `when`.
    pub(super) fn will_look_at(&self, when: Instant) {
        let millis = u64::try_from(when.saturating_duration_since(self.epoch).as_millis()).unwrap_or(NEVER);
        self.wake_at.store(millis, Ordering::Relaxed);
    }

    /// Bytes arrived.
    pub(super) fn on_read(&self) {
        if self.http1.load(Ordering::Relaxed)
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.reading_since.load(Ordering::Relaxed) == NEVER
        {
            let now = self.now();
            self.reading_since.store(now, Ordering::Relaxed);
            let cut_at = now.saturating_add(self.head_limit.load(Ordering::Relaxed));
            if self.wake_at.load(Ordering::Relaxed) > cut_at {
                self.head_begun.notify_one();
            }
        }
    }

    /// A request's headers were read: it is handed to the router (or a gRPC stream opened).
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.reading_since.store(NEVER, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// When the supervisor should look again.
    pub(super) fn next_check(&self, policy: Policy) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        if self.in_flight.load(Ordering::Acquire) > 0 {
            // Requests answer within their own deadlines; look again once they may be done.
            return Instant::now() + policy.header_read.unwrap_or(Duration::from_secs(5));
        }
        let reading = self.reading_since.load(Ordering::Relaxed);
        if let Some(limit) = policy.header_read
            && reading != NEVER
        {
            return self.at(reading) + limit;
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (self.at(self.idle_since.load(Ordering::Relaxed)) + idle).min(far)
    }

    /// The deadline that passed, if any.
    pub(super) fn expired(&self, policy: Policy) -> Option<Closed> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = Instant::now();
        let reading = self.reading_since.load(Ordering::Relaxed);
        if let Some(limit) = policy.header_read
            && reading != NEVER
        {
            return (now >= self.at(reading) + limit).then_some(Closed::HeaderTimeout);
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (now >= self.at(self.idle_since.load(Ordering::Relaxed)) + idle).then_some(Closed::Idle)
    }

    /// What closing this connection to make room would cost; `None` while a request is in
    /// flight or the connection had one (or opened, or began a head) under [`HOARDING`] ago.
    pub(super) fn vacancy(&self, now: Instant) -> Option<Vacancy> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let reading = self.reading_since.load(Ordering::Relaxed);
        let (kind, since) = if reading != NEVER {
            (VacancyKind::StalledHead, self.at(reading))
        } else if !self.served.load(Ordering::Relaxed) {
            (VacancyKind::Silent, self.epoch)
        } else if self.http1.load(Ordering::Relaxed) {
            (VacancyKind::IdleHttp1, self.at(self.idle_since.load(Ordering::Relaxed)))
        } else {
            (VacancyKind::IdleHttp2, self.at(self.idle_since.load(Ordering::Relaxed)))
        };
        (now.saturating_duration_since(since) >= HOARDING).then_some(Vacancy { kind, since })
    }

    pub(super) fn ask_to_leave(&self) {
        self.evicting.store(true, Ordering::Relaxed);
        self.eviction.notify_one();
    }

    /// Asked to make room and not serving a request meanwhile: it will be gone shortly.
    pub(super) fn leaving(&self) -> bool {
        self.evicting.load(Ordering::Relaxed) && self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Asked to make room: whether it still may, checked again now (a request may have begun
    /// since it was chosen), and how; declining lets the accept loop choose another.
    pub(super) fn accept_eviction(&self) -> Option<Vacancy> {
        let vacancy = self.vacancy(Instant::now());
        if vacancy.is_none() {
            self.evicting.store(false, Ordering::Relaxed);
        }
        vacancy
    }

    /// When a graceful close begun at `since` is overdue: [`CLOSE_GRACE`] after it began, after
    /// the last request ended and after the last blocked write went through. Until then the
    /// client may still finish it; a request or a blocked write postpones it (the request
    /// deadline and the write timeout bound those).
    pub(super) fn close_deadline(&self, since: Instant) -> Instant {
        if self.in_flight.load(Ordering::Acquire) > 0 || self.write_blocked.load(Ordering::Relaxed) {
            return Instant::now() + CLOSE_GRACE;
        }
        let mut quiet = since.max(self.at(self.idle_since.load(Ordering::Relaxed)));
        let resumed = self.write_resumed.load(Ordering::Relaxed);
        if resumed != NEVER {
            quiet = quiet.max(self.at(resumed));
        }
        quiet + CLOSE_GRACE
    }

    pub(super) fn close_overdue(&self, since: Instant) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            && !self.write_blocked.load(Ordering::Relaxed)
            && Instant::now() >= self.close_deadline(since)
    }

    pub(super) fn write_blocks(&self) {
        self.write_blocked.store(true, Ordering::Relaxed);
    }

    pub(super) fn write_resumes(&self) {
        self.write_resumed.store(self.now(), Ordering::Relaxed);
        self.write_blocked.store(false, Ordering::Relaxed);
    }

    /// Whether answers say `Connection: close`.
    pub(super) fn closing(&self) -> bool {
        self.closing.load(Ordering::Relaxed)
    }

    /// When the connection has been idle for `timeout`, if nothing is in flight now; `waker`
    /// is woken when the last request in flight ends, so its owner can look again.
    pub(crate) fn idle_deadline(&self, timeout: Duration, waker: &Waker) -> Option<Instant> {
        self.idle_waker.register(waker);
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        Some(self.at(self.idle_since.load(Ordering::Relaxed)) + timeout)
    }
}

/// One request (or gRPC stream) in flight; its end (the response body dropped, sent or not)
/// makes the connection idle again when it was the last. The supervisor sees it when it next
/// looks; a reader waiting for idleness is woken.
pub(crate) struct InFlight(Arc<Activity>);

impl InFlight {
    pub(super) fn activity(&self) -> &Activity {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since.store(activity.now(), Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.idle_waker.wake();
        }
    }
}
