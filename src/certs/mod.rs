//! Every certificate the operator makes, keeps or checks:
//!
//! - the serving certificate of the webhook and xDS ports: generated with rcgen, written as
//!   PEM, reloaded while serving ([`serving`]); in a cluster, kept in a Secret and rotated by
//!   the leader ([`webhook_secret`]); what fleets are told to trust ([`trust`]);
//! - the fleets' workload identities: the CA that issues each fleet a client certificate naming
//!   it ([`identity_ca`]), that CA's Secret in the cluster ([`identity_secret`]), and what the
//!   xDS server accepts at the TLS handshake and reads off a certificate ([`client_auth`]);
//! - PEM text read into DER, in one place ([`pem`]).

pub mod client_auth;
pub mod identity_ca;
pub mod identity_secret;
pub mod pem;
pub mod serving;
pub mod trust;
pub mod webhook_secret;
