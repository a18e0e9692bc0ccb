//! Connection slots: a cap on open connections, and what a client finds at the cap. A server
//! either refuses it at once (the xDS port: a proxy retries, and the cap is set from memory)
//! or holds it, accepted and unserved, while one open connection at a time is asked to close
//! (the webhook and operations ports: see "Making room" in `net`'s docs). Either way the slot
//! is taken before anything is read from the client.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, MissedTickBehavior};

use super::activity::Activity;

/// How often the accept loop, at the cap with a client waiting, looks for a connection to
/// close (when the one asked before has gone, or none could be asked yet).
const MAKING_ROOM_REPEAT: Duration = Duration::from_millis(250);
/// How long a connection must have had no request in flight (or have gone without its first
/// request, or have been reading a request head) before it may be closed to make room.
pub(super) const HOARDING: Duration = Duration::from_secs(1);

/// What a client finds when every slot is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtCapacity {
    /// It waits, accepted and unserved, while an open connection is asked to close.
    MakeRoom,
    /// Its connection is closed at once.
    Refuse,
}

/// One server's connection slots.
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    at_capacity: AtCapacity,
    /// The open connections, one of which closes when a client waits at the cap; only those
    /// of a server that makes room are listed.
    roster: Roster,
}

/// The outcome of asking for a slot.
pub(crate) enum Taken {
    /// Held for as long as the connection is open.
    Slot(OwnedSemaphorePermit),
    /// Every slot taken, and the server refuses at the cap.
    Refused,
    /// The server stopped while the client waited.
    Stopped,
}

impl Slots {
    pub(crate) fn new(max_connections: usize, at_capacity: AtCapacity) -> Self {
        Self {
            free: Arc::new(Semaphore::new(max_connections.max(1))),
            at_capacity,
            roster: Roster::default(),
        }
    }

    /// Lists a connection among those that may be asked to make room, while the guard lives
    /// (not listed where the server refuses at the cap: nothing asks them).
    pub(super) fn list(&self, activity: &Arc<Activity>) -> Option<Listed<'_>> {
        (self.at_capacity == AtCapacity::MakeRoom).then(|| self.roster.list(activity))
    }

    /// A slot for a client just accepted. At the cap, refuses it or waits for a slot while
    /// asking connections to make room, one at a time, until `stop` completes.
    pub(crate) async fn take(&self, mut stop: Pin<&mut impl Future<Output = ()>>) -> Taken {
        if let Ok(slot) = self.free.clone().try_acquire_owned() {
            return Taken::Slot(slot);
        }
        if self.at_capacity == AtCapacity::Refuse {
            return Taken::Refused;
        }
        let mut looking = tokio::time::interval(MAKING_ROOM_REPEAT);
        looking.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = stop.as_mut() => return Taken::Stopped,
                slot = self.free.clone().acquire_owned() => {
                    return slot.map_or(Taken::Stopped, Taken::Slot);
                }
                _ = looking.tick() => self.roster.make_room(Instant::now()),
            }
        }
    }
}

/// The open connections, for the accept loop to choose one to close when a client waits at
/// the cap. Locked when a connection opens or ends and while making room, never per request.
#[derive(Default)]
pub(super) struct Roster(Mutex<Vec<Arc<Activity>>>);

impl Roster {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Activity>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists a connection while the returned guard lives.
    pub(super) fn list(&self, activity: &Arc<Activity>) -> Listed<'_> {
        self.lock().push(activity.clone());
        Listed { roster: self, activity: activity.clone() }
    }

    /// Asks the connection best lost (see [`Vacancy`]) to close, unless one asked before is
    /// still on its way out: one connection per waiting client.
    pub(super) fn make_room(&self, now: Instant) {
        let listed = self.lock();
        if listed.iter().any(|activity| activity.leaving()) {
            return;
        }
        let best = listed
            .iter()
            .filter_map(|activity| Some((activity.vacancy(now)?, activity)))
            .min_by_key(|(vacancy, _)| *vacancy);
        if let Some((_, activity)) = best {
            activity.ask_to_leave();
        }
    }
}

/// A connection's place in the [`Roster`].
pub(super) struct Listed<'a> {
    roster: &'a Roster,
    activity: Arc<Activity>,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let mut listed = self.roster.lock();
        if let Some(index) = listed.iter().position(|activity| Arc::ptr_eq(activity, &self.activity)) {
            listed.swap_remove(index);
        }
    }
}

/// What closing a connection would cost, cheapest first: by kind (see `net`'s docs), then
/// the one that has been in that state longest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Vacancy {
    pub(super) kind: VacancyKind,
    pub(super) since: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum VacancyKind {
    /// No request yet (the TLS handshake may still run).
    Silent,
    /// HTTP/1.1: a request head begun and not finished.
    StalledHead,
    /// HTTP/2 without a stream: GOAWAY, and the client retries elsewhere.
    IdleHttp2,
    /// HTTP/1.1 between requests: closing it may race a request (see `net`'s docs).
    IdleHttp1,
}
