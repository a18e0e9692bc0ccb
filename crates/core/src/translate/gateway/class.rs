//! GatewayClasses: the operator implements those whose `controllerName` is its own, and takes
//! their fleets' settings from the Envoy their `parametersRef` names, if any.

use std::sync::Arc;

use super::ClassOutcome;
use super::conditions::{
    ACCEPTED, REASON_ACCEPTED, REASON_INVALID_PARAMETERS, REASON_SUPPORTED_VERSION, SUPPORTED_VERSION,
    judged, state,
};
use crate::api::Envoy;
use crate::api::gateway::{GatewayClass, ParametersReference};
use crate::names::CONTROLLER_NAME;

/// The group and kind a `parametersRef` names the template of a class's fleets by.
pub const PARAMETERS_GROUP: &str = "example.com";
pub const PARAMETERS_KIND: &str = "Envoy";

/// A class the operator implements and accepts, with the template of its fleets.
#[derive(Clone, Copy, Debug)]
pub struct AcceptedClass<'a> {
    pub name: &'a str,
    pub template: Option<&'a Envoy>,
}

/// Whether the operator implements `class`.
pub fn is_ours(class: &GatewayClass) -> bool {
    class.spec.controller_name == CONTROLLER_NAME
}

/// The class's conditions, and the class itself when it is accepted.
pub fn judge<'a>(
    class: &'a GatewayClass,
    parameters: &'a [Arc<Envoy>],
) -> (ClassOutcome, Option<AcceptedClass<'a>>) {
    let name = class.metadata.name.as_deref().unwrap_or_default();
    let template = match &class.spec.parameters_ref {
        None => Ok(None),
        Some(reference) => template(reference, parameters).map(Some),
    };
    let accepted = match &template {
        Ok(_) => state(true, REASON_ACCEPTED, "the class is implemented by example.com/envoy-operator"),
        Err(message) => state(false, REASON_INVALID_PARAMETERS, message.clone()),
    };
    let outcome = ClassOutcome {
        name: name.to_owned(),
        generation: class.metadata.generation,
        conditions: vec![
            judged(ACCEPTED, accepted),
            judged(
                SUPPORTED_VERSION,
                state(true, REASON_SUPPORTED_VERSION, "Gateway API v1 (v1.3 standard channel) is supported"),
            ),
        ],
    };
    (outcome, template.ok().map(|template| AcceptedClass { name, template }))
}

/// The Envoy `reference` names, or why it cannot be used.
fn template<'a>(reference: &ParametersReference, parameters: &'a [Arc<Envoy>]) -> Result<&'a Envoy, String> {
    if reference.group != PARAMETERS_GROUP || reference.kind != PARAMETERS_KIND {
        return Err(format!(
            "parametersRef names a {}.{}: only an Envoy (group {PARAMETERS_GROUP}, kind {PARAMETERS_KIND}) can hold a class's parameters",
            reference.kind, reference.group
        ));
    }
    let Some(namespace) = reference.namespace.as_deref() else {
        return Err("parametersRef names an Envoy without its namespace: Envoys are namespaced".to_owned());
    };
    parameters
        .iter()
        .find(|envoy| {
            envoy.metadata.namespace.as_deref() == Some(namespace)
                && envoy.metadata.name.as_deref() == Some(reference.name.as_str())
        })
        .map(AsRef::as_ref)
        .ok_or_else(|| {
            format!("parametersRef names the Envoy {namespace}/{}, which does not exist", reference.name)
        })
}
