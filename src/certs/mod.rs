//! The fleets' workload identities: the CA that issues each fleet a client certificate naming
//! it ([`identity_ca`]), that CA's Secret in the cluster ([`identity_secret`]), and what the
//! xDS server accepts at the TLS handshake and reads off a certificate ([`client_auth`]).

pub mod client_auth;
pub mod identity_ca;
pub mod identity_secret;
