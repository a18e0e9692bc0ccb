//! The Gateway API features the operator supports, by their conformance names
//! (`sigs.k8s.io/gateway-api/pkg/features`): written into the status of every GatewayClass it
//! implements (GEP-2162), from which the conformance suite infers what to run, and the list
//! README's conformance command passes the suite (a test holds the two equal). A feature is
//! here only when our reproduction of every upstream test that needs it passes.

use crate::api::gateway::SupportedFeature;

/// Sorted by name, as GEP-2162 asks.
pub const SUPPORTED_FEATURES: &[&str] = &[
    "GRPCRoute",
    "Gateway",
    "GatewayHTTPListenerIsolation",
    "GatewayInfrastructurePropagation",
    "GatewayPort8080",
    "GatewayStaticAddresses",
    "HTTPRoute",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteBackendTimeout",
    "HTTPRouteHostRewrite",
    "HTTPRouteMethodMatching",
    "HTTPRouteParentRefPort",
    "HTTPRoutePathRedirect",
    "HTTPRoutePathRewrite",
    "HTTPRoutePortRedirect",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteResponseHeaderModification",
    "HTTPRouteSchemeRedirect",
    "ReferenceGrant",
    // Served only where the API server serves TLSRoutes (the experimental channel's CRDs), as
    // the GATEWAY-TLS profile needs them to run at all.
    "TLSRoute",
];

/// [`SUPPORTED_FEATURES`] as a GatewayClass's status holds them.
pub fn supported_features() -> Vec<SupportedFeature> {
    SUPPORTED_FEATURES.iter().map(|name| SupportedFeature { name: (*name).to_owned() }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_features_are_sorted_and_each_named_once() {
        let mut sorted = SUPPORTED_FEATURES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, SUPPORTED_FEATURES, "sorted (byte order, as Go's sort.Strings) and unique");
    }
}
