//! State of the world (`StreamAggregatedResources`): each request names the complete
//! subscription of its type and answers the response whose nonce it carries; a request naming
//! an older nonce than the newest response of its type is stale and ignored (its successor is
//! on the way). Responses carry the whole set of the type the proxy should have.

use envoy_types::pb::envoy::config::core::v3::{ControlPlane, Node};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use super::plan::{Push, StreamState};
use super::stream::{Answer, RequestError, Wire, nack_message};
use super::tracker::Protocol;

pub(crate) struct Sotw;

impl Wire for Sotw {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    const PROTOCOL: Protocol = Protocol::StateOfTheWorld;

    fn node(request: &DiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn apply(state: &mut StreamState, request: DiscoveryRequest) -> Result<Option<Answer>, RequestError> {
        if request.type_url.is_empty() {
            return Err(RequestError::MissingTypeUrl);
        }
        let mut type_state = state.type_state(&request.type_url)?;
        let nonce = request.response_nonce;
        if !nonce.is_empty() && type_state.last_nonce() != Some(nonce.as_str()) {
            return Ok(None);
        }
        let answer = (!nonce.is_empty()).then(|| {
            let error = request.error_detail.map(|status| nack_message(&status.message));
            let settled = type_state.settle(&nonce, error.is_some());
            Answer { type_url: request.type_url, settled, error }
        });
        type_state.replace_subscription(request.resource_names)?;
        Ok(answer)
    }

    fn response(push: Push, control_plane: Option<&ControlPlane>) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: push.version.to_string(),
            resources: push.full_set.iter().map(|resource| resource.body().clone()).collect(),
            type_url: push.type_url.to_string(),
            nonce: push.nonce,
            control_plane: control_plane.cloned(),
            ..Default::default()
        }
    }
}
