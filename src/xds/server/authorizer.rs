//! Who is at the other end of an ADS stream, and the hook that binds the stream to one fleet
//! on its first request.

use std::net::SocketAddr;

use envoy_operator_core::identity::FleetIdentity;
use envoy_types::pb::envoy::config::core::v3::Node;
use tonic::Status;

use super::cache::FleetKey;

/// Who is at the other end of a stream: its address, and the fleet its client certificate
/// proved (none on a connection without client certificates).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    pub address: Option<SocketAddr>,
    pub identity: Option<FleetIdentity>,
}

/// Decides which fleet a proxy belongs to, from the node of its first request and its peer.
/// A stream only ever receives the snapshot of the key returned here. Refuse with
/// `Status::permission_denied` and a message saying why: the stream ends with it, and Envoy
/// logs it and retries with backoff.
pub trait Authorizer: Send + Sync + 'static {
    fn authorize(&self, node: &Node, peer: &Peer) -> Result<FleetKey, Status>;
}

/// A closure over the node and the peer's address (tests, benchmarks).
impl<F> Authorizer for F
where
    F: Fn(&Node, Option<SocketAddr>) -> Result<FleetKey, Status> + Send + Sync + 'static,
{
    fn authorize(&self, node: &Node, peer: &Peer) -> Result<FleetKey, Status> {
        self(node, peer.address)
    }
}
