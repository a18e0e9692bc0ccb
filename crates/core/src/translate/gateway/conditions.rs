//! The conditions of GatewayClasses, Gateways, their listeners and HTTPRoutes, in Gateway API's
//! words (`apis/v1/gatewayclass_types.go`, `gateway_types.go`, `shared_types.go`): their types
//! and reasons. Those a route shares with EnvoyRoute come from [`crate::route::conditions`] and
//! [`crate::route::backend`].

pub use crate::route::backend::{REASON_BACKEND_NOT_FOUND, REASON_INVALID_KIND};
pub use crate::route::conditions::{
    ACCEPTED, ConditionState, REASON_NO_MATCHING_PARENT, REASON_RESOLVED_REFS, REASON_UNSUPPORTED_VALUE,
    RESOLVED_REFS,
};

use super::Judged;

/// Condition types besides `Accepted` and `ResolvedRefs`.
pub const PROGRAMMED: &str = "Programmed";
pub const CONFLICTED: &str = "Conflicted";
pub const SUPPORTED_VERSION: &str = "SupportedVersion";

/// The positive reasons: the condition type's own name.
pub const REASON_ACCEPTED: &str = "Accepted";
pub const REASON_PROGRAMMED: &str = "Programmed";
pub const REASON_SUPPORTED_VERSION: &str = "SupportedVersion";
pub const REASON_NO_CONFLICTS: &str = "NoConflicts";

// GatewayClass.
/// `parametersRef` names nothing the operator can use.
pub const REASON_INVALID_PARAMETERS: &str = "InvalidParameters";

// Gateway.
/// No listener of the Gateway is valid.
pub const REASON_LISTENERS_NOT_VALID: &str = "ListenersNotValid";
/// `spec.addresses` has an address of a type the operator does not support (any but
/// `IPAddress`), or a value that is no IP address.
pub const REASON_UNSUPPORTED_ADDRESS: &str = "UnsupportedAddress";
/// The fleet's Service has no address yet.
pub const REASON_ADDRESS_NOT_ASSIGNED: &str = "AddressNotAssigned";
/// The addresses of `spec.addresses` cannot be had: the API server refuses the cluster IP, or
/// more than one is asked for.
pub const REASON_ADDRESS_NOT_USABLE: &str = "AddressNotUsable";
/// The fleet has no ready proxy yet.
pub const REASON_PENDING: &str = "Pending";
/// The Gateway, or a listener, cannot be served as it is.
pub const REASON_INVALID: &str = "Invalid";

// Listeners.
pub const REASON_PORT_UNAVAILABLE: &str = "PortUnavailable";
pub const REASON_UNSUPPORTED_PROTOCOL: &str = "UnsupportedProtocol";
pub const REASON_INVALID_ROUTE_KINDS: &str = "InvalidRouteKinds";
pub const REASON_INVALID_CERTIFICATE_REF: &str = "InvalidCertificateRef";
pub const REASON_PROTOCOL_CONFLICT: &str = "ProtocolConflict";
pub const REASON_HOSTNAME_CONFLICT: &str = "HostnameConflict";

// Routes (and listeners: a reference across namespaces no ReferenceGrant allows).
pub const REASON_REF_NOT_PERMITTED: &str = "RefNotPermitted";
pub const REASON_NOT_ALLOWED_BY_LISTENERS: &str = "NotAllowedByListeners";
pub const REASON_NO_MATCHING_LISTENER_HOSTNAME: &str = "NoMatchingListenerHostname";

/// A condition's target state.
pub fn state(status: bool, reason: &'static str, message: impl Into<String>) -> ConditionState {
    ConditionState { status, reason, message: message.into() }
}

/// A condition of type `type_` in `state`.
pub fn judged(type_: &'static str, state: ConditionState) -> Judged {
    Judged { type_, state }
}
