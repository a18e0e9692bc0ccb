//! The admission webhook server: AdmissionReview plumbing ([`review`]), the decisions
//! ([`handler`], pure), the HTTP routes ([`router`]) and TLS serving ([`server`]).

pub mod handler;
pub mod inject;
pub mod review;
pub mod router;
pub mod server;
