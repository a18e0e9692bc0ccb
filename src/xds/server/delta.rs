//! Delta (`DeltaAggregatedResources`): requests add and remove subscribed names (the first one
//! of a type also lists the versions a reconnecting proxy already has) and may ACK or NACK
//! one response by its nonce; responses carry only changed resources and removed names.

use envoy_types::pb::envoy::config::core::v3::{ControlPlane, Node};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource as DeltaResource,
};

use super::plan::{Push, StreamState};
use super::stream::{Answer, RequestError, Wire, nack_message};
use super::tracker::Protocol;

pub(crate) struct Delta;

impl Wire for Delta {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    const PROTOCOL: Protocol = Protocol::Delta;

    fn node(request: &DeltaDiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn apply(
        state: &mut StreamState,
        request: DeltaDiscoveryRequest,
    ) -> Result<Option<Answer>, RequestError> {
        if request.type_url.is_empty() {
            return Err(RequestError::MissingTypeUrl);
        }
        let mut type_state = state.type_state(&request.type_url)?;
        let nonce = request.response_nonce;
        let answer = (!nonce.is_empty()).then(|| {
            let error = request.error_detail.map(|status| nack_message(&status.message));
            let settled = type_state.settle(&nonce, error.is_some());
            Answer { type_url: request.type_url, settled, error }
        });
        type_state.update_subscription(
            request.resource_names_subscribe,
            request.resource_names_unsubscribe,
            request.initial_resource_versions,
        )?;
        Ok(answer)
    }

    fn response(push: Push, control_plane: Option<&ControlPlane>) -> DeltaDiscoveryResponse {
        let resources = push
            .upserts
            .iter()
            .map(|resource| DeltaResource {
                name: resource.name().to_string(),
                version: resource.version().to_string(),
                resource: Some(resource.body().clone()),
                ..Default::default()
            })
            .collect();
        DeltaDiscoveryResponse {
            system_version_info: push.version.to_string(),
            resources,
            type_url: push.type_url.to_string(),
            removed_resources: push.removals.iter().map(|name| name.to_string()).collect(),
            nonce: push.nonce,
            control_plane: control_plane.cloned(),
            ..Default::default()
        }
    }
}
