//! Serving on a TCP listener, plain or over TLS, with every connection bounded: the webhook and
//! operations ports (an axum router, [`serve`]) and the xDS port (tonic, on the same accept
//! loop, slots and activity tracking: `xds::server`'s `accept`). What follows is the HTTP
//! ports' story; the xDS port refuses a client at its cap instead of making room (a proxy
//! retries, and its cap is set from memory), and closes a connection without a stream after
//! its idle timeout.
//!
//! - **A cap on open connections, and room made at the cap.** At the cap the accept loop holds
//!   one accepted connection unserved (further clients wait in the kernel's backlog instead of
//!   costing a file descriptor each) and, while it waits, asks one open connection at a time to
//!   close (see "Making room" below). However idle connections hold the slots, a new client is
//!   served within about two seconds, well inside the API server's `timeoutSeconds: 5`; slots
//!   held by requests in flight free up within the request deadline.
//! - **Deadlines on every phase.** The TLS handshake; a new connection's first request; a
//!   request's headers once their first byte arrived (HTTP/1.1); every write (a client that
//!   stops reading is cut off instead of pinning its response); idleness; and a graceful close
//!   the client does not complete (an HTTP/2 client that never reads never answers the ping
//!   after GOAWAY) is cut after `CLOSE_GRACE` (one second) once nothing is in flight or being written.
//! - **Idle connections closed, at a pace the API server tolerates.** Its webhook client keeps
//!   idle HTTP/1.1 connections up to 90 s (Go's `IdleConnTimeout`) and may send a request at the
//!   very moment a server closes one: that request fails, and with `failurePolicy: Fail` so does
//!   the user's write. So an HTTP/1.1 connection that served requests is closed only after
//!   [`ConnectionLimits::http1_idle_timeout`] (120 s), longer than the client's own. HTTP/2 has a
//!   graceful close (GOAWAY: the client retries what the server did not take), so idle HTTP/2
//!   connections go sooner, and keep-alive pings find dead peers.
//! - **Graceful shutdown in two steps.** While [`Shutdown::drain`] runs, the server still
//!   accepts and answers (the API server may keep sending until it has seen the endpoint go),
//!   but HTTP/2 connections get GOAWAY and HTTP/1.1 answers carry `Connection: close`, so
//!   clients move on without a race. When [`Shutdown::stop`] follows, the listener closes,
//!   every connection is asked to finish, and what still runs after the grace period is dropped.
//!
//! **Making room at the cap.** A connection with a request in flight is never chosen, nor one
//! that had one less than `HOARDING` (a second) ago. Of the others, in this order, the oldest
//! first:
//!
//! 1. connections that never sent a request (TLS handshakes included), and HTTP/1.1 request
//!    heads begun and not finished: the API server writes its request as soon as it has
//!    connected, in one piece, so only a client hoarding connections loses these;
//! 2. idle HTTP/2 connections, closed with GOAWAY: a client retries elsewhere whatever the
//!    server did not take, so nothing fails;
//! 3. idle HTTP/1.1 connections, the longest idle first, closed at once.
//!
//! The third is the pooled-connection race of the bullet above, taken on purpose: without it,
//! 128 keep-alive connections that each sent one request hold every slot for 120 s, and every
//! Foo and Envoy write fails meanwhile (the API server gives up after 5 s). With it, the race
//! can only happen while every slot is taken and another client waits, and it is kept small: a
//! connection is closed only then, one per waiting client, only when no hoarder or idle
//! HTTP/2 connection is left, after re-checking just before closing that no request byte has
//! arrived, and it is the longest-idle one: Go's transport reuses its most recently used idle
//! connection, so the one idle longest is the one a pool is least likely to pick next. A client
//! that reused a connection within the last second never loses it.
//!
//! Our own accept loop rather than axum-server's: it gives no way to cap connections before
//! accepting or to close one connection (idle) gracefully, and hyper's own
//! `header_read_timeout` also runs while a keep-alive connection waits for its next request,
//! which would cut the API server's pooled connections after 5 s.
//!
//! The modules, one concern each: `accept` the loop; `slots` the cap and making
//! room; `activity` what a connection is doing; `tls` the handshake; `monitored` the TCP
//! stream's reads and write deadlines; `supervise` a connection's deadlines and closes; `http`
//! the HTTP servers; [`ServeConfig`] and [`ConnectionLimits`] how a server is configured.

pub(crate) mod accept;
pub(crate) mod activity;
mod deadlines;
mod http;
mod limits;
pub mod metrics;
mod monitored;
mod serve_config;
pub(crate) mod slots;
mod supervise;
pub mod tls;

#[cfg(test)]
mod at_the_cap;
#[cfg(test)]
mod tests;

pub use self::http::{Http, Shutdown, serve};
pub use self::limits::ConnectionLimits;
pub use self::metrics::ConnectionMetrics;
pub use self::serve_config::ServeConfig;
pub use self::slots::AtCapacity;
