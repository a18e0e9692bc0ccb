//! A connection's supervisor: polls hyper's connection to its end and enforces the deadlines
//! and closes hyper does not (idleness, request heads, eviction, shutdown, a graceful close the
//! client never completes).

use std::future::Future;
use std::io;
use std::pin::Pin;

use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, sleep_until};

use super::Shutdown;
use super::activity::Activity;
use super::deadlines::{Closed, Policy};
use super::http::Tracked;
use super::slots::{Vacancy, VacancyKind};

/// A hyper connection that can be asked to finish gracefully.
pub(super) trait GracefulConnection: Future<Output = Result<(), hyper::Error>> {
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I> GracefulConnection for http1::Connection<TokioIo<I>, Tracked>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        http1::Connection::graceful_shutdown(self)
    }
}

impl<I> GracefulConnection for http2::Connection<TokioIo<I>, Tracked, TokioExecutor>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        http2::Connection::graceful_shutdown(self)
    }
}

/// Polls the connection to its end, closing it gracefully when it idles too long, the server
/// drains and stops, or a client waiting at the cap needs its slot; at once when a request's
/// headers take too long; and cutting a graceful close the client does not complete.
///
/// Requests do not wake it: it looks at the connection's [`Activity`] when its next deadline
/// comes (a deadline that moved later meanwhile is slept on again), and only a request head
/// that must be cut before then wakes it early. So a request costs no extra poll of the
/// connection's task, no timer re-registration and no re-registration with the shutdown
/// tokens (which every connection shares).
pub(super) async fn supervise<C: GracefulConnection>(
    connection: C,
    activity: &Activity,
    policy: Policy,
    shutdown: Shutdown,
) -> Closed {
    tokio::pin!(connection);
    // Created once: each creation registers with its token or the timer.
    let drain = shutdown.drain.cancelled();
    let stop = shutdown.stop.cancelled();
    let eviction = activity.eviction.notified();
    let looking = sleep_until(Instant::now());
    tokio::pin!(drain, stop, eviction, looking);
    // Why the connection is closing gracefully, and since when.
    let mut closing: Option<(Closed, Instant)> = None;
    let mut draining = false;
    loop {
        let check = match closing {
            None => activity.next_check(policy),
            Some((_, since)) => activity.close_deadline(since),
        };
        if looking.deadline() != check {
            looking.as_mut().reset(check);
        }
        activity.will_look_at(check);
        tokio::select! {
            result = connection.as_mut() => {
                return match (closing, result) {
                    (Some((reason, _)), _) => reason,
                    (None, Ok(())) => Closed::Peer,
                    (None, Err(error)) if is_timeout(&error) => Closed::WriteTimeout,
                    (None, Err(_)) => Closed::Error,
                };
            }
            () = &mut drain, if !draining && closing.is_none() => {
                draining = true;
                if policy.http2 {
                    connection.as_mut().graceful_shutdown();
                    closing = Some((Closed::Shutdown, Instant::now()));
                } else {
                    // Closing an idle HTTP/1.1 connection now could race a request; the next
                    // answer says `Connection: close` instead.
                    activity.close_after_next_response();
                }
            }
            () = &mut stop, if closing.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing = Some((Closed::Shutdown, Instant::now()));
            }
            () = activity.head_begun.notified() => {}
            () = &mut eviction, if closing.is_none() => {
                eviction.set(activity.eviction.notified());
                match activity.accept_eviction() {
                    // Half a request head: nothing to finish, and hyper would wait for the rest.
                    Some(Vacancy { kind: VacancyKind::StalledHead, .. }) => return Closed::Evicted,
                    Some(_) => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some((Closed::Evicted, Instant::now()));
                    }
                    None => {}
                }
            }
            () = &mut looking => match closing {
                None => match activity.expired(policy) {
                    Some(Closed::HeaderTimeout) => return Closed::HeaderTimeout,
                    Some(reason) => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some((reason, Instant::now()));
                    }
                    None => {}
                },
                Some((reason, since)) => {
                    if activity.close_overdue(since) {
                        return reason;
                    }
                }
            },
        }
    }
}

/// Whether a connection error came from a write that timed out (see [`super::monitored::Monitored`]).
fn is_timeout(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::TimedOut
        {
            return true;
        }
        source = current.source();
    }
    false
}
