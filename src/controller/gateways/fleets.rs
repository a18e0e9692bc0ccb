//! A Gateway's fleet: the `Envoy` the translation made for it, applied as any child is (server-
//! side apply, the operator's field manager), so the Envoy reconciler builds its Deployment,
//! Service, bootstrap and identity. The Envoy carries the Gateway's label and a controller
//! ownerReference to it (set by the core): Kubernetes' garbage collector deletes it with the
//! Gateway. The operator deletes it itself when the Gateway's class stops being the operator's,
//! when the Gateway is not accepted (nothing to serve), and when the fleet has moved to a new
//! name (the one of before goes once the new one is ready); and only an Envoy it labelled for
//! that very Gateway (name and uid).
//!
//! An Envoy of the fleet's name that is not the Gateway's is never touched (the translation
//! reports it in the Gateway's status).

use envoy_operator_core::api::Envoy;
use envoy_operator_core::api::gateway::Gateway;
use envoy_operator_core::children::apply::{needs_apply, strip_metadata};
use envoy_operator_core::names::FIELD_MANAGER;
use envoy_operator_core::translate::gateway::fleet::is_fleet_of;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use tracing::{debug, info};

use crate::controller::{Context, Error, Result};

const KIND: &str = "Envoy";

/// What became of a fleet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The cluster already held it as desired: nothing was sent.
    Current,
    /// Created or corrected.
    Applied,
    /// Its name is taken by an Envoy that is not this Gateway's: left alone.
    Foreign,
}

/// The Gateway a fleet is for: its namespace (the fleet's), name and uid.
pub struct Owner<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
}

/// Makes the cluster hold `desired`, the fleet of the Gateway `gateway`, looking it up in
/// `envoys` (the cache) and, on a miss, in the cluster: an Envoy created moments ago, or someone
/// else's, is never taken for a missing one.
pub async fn apply(
    ctx: &Context,
    envoys: &Store<Envoy>,
    gateway: &Owner<'_>,
    desired: &Envoy,
) -> Result<Applied> {
    let name = desired.name_any();
    let namespace = gateway.namespace;
    let api: Api<Envoy> = Api::namespaced(ctx.client.clone(), namespace);
    let current = match envoys.get(&ObjectRef::new(&name).within(namespace)) {
        Some(cached) => Some(cached),
        None => {
            let fresh = api.get_opt(&name).await.map_err(api_error("get", &name))?;
            fresh.map(|mut fresh| {
                strip_metadata(fresh.meta_mut());
                std::sync::Arc::new(fresh)
            })
        }
    };
    let params = match &current {
        Some(current) if !is_fleet_of(current, gateway.name, Some(gateway.uid)) => {
            debug!(%namespace, %name, gateway = gateway.name, "an Envoy of the fleet's name is not the Gateway's: left alone");
            return Ok(Applied::Foreign);
        }
        Some(current) if !needs_apply(desired, current.as_ref()) => return Ok(Applied::Current),
        // Ours and drifted: take back every field we own.
        Some(_) => PatchParams::apply(FIELD_MANAGER).force(),
        // New: without force, so an Envoy of that name created meanwhile by someone else, with
        // other values, is refused (409, retried, then seen as foreign) rather than taken.
        None => PatchParams::apply(FIELD_MANAGER),
    };
    api.patch(&name, &params, &Patch::Apply(desired)).await.map_err(api_error("apply", &name))?;
    ctx.metrics.wrote(KIND, "apply");
    info!(%namespace, %name, gateway = gateway.name, created = current.is_none(), "applied the Gateway's fleet");
    Ok(Applied::Applied)
}

/// Why a Gateway's fleets go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// Its class is no longer the operator's.
    ClassNotOurs,
    /// It is not accepted (no valid listener, or something it asks for is not supported): no
    /// proxies run for a Gateway with nothing to serve.
    NothingToServe,
    /// Its fleet has a new name, and the fleet under it is ready: the fleets under other names go.
    Moved,
}

impl Removal {
    fn says(self) -> &'static str {
        match self {
            Self::ClassNotOurs => "deleted the fleet of a Gateway whose class is not the operator's",
            Self::NothingToServe => "deleted the fleet of a Gateway with no valid listener",
            Self::Moved => "deleted the Gateway's fleet of its earlier name",
        }
    }
}

/// Deletes the fleets the operator applied for `gateway` (labelled with it and controlled by
/// its uid), but the one named `keep`, for the reason `why`. The uid precondition keeps a
/// same-named replacement. Returns the names of those deleted.
pub async fn remove(
    ctx: &Context,
    envoys: &Store<Envoy>,
    gateway: &Gateway,
    keep: Option<&str>,
    why: Removal,
) -> Result<Vec<String>> {
    let (Some(namespace), Some(uid)) = (gateway.namespace(), gateway.uid()) else {
        return Ok(Vec::new());
    };
    let name = gateway.name_any();
    let fleets = envoys.state_filter(|envoy| {
        envoy.namespace().as_deref() == Some(namespace.as_str())
            && envoy.meta().deletion_timestamp.is_none()
            && keep.is_none_or(|keep| envoy.name_any() != keep)
            && is_fleet_of(envoy, &name, Some(&uid))
    });
    let api: Api<Envoy> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut deleted = Vec::new();
    for fleet in fleets {
        let fleet_name = fleet.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: fleet.uid(), resource_version: None }),
            ..DeleteParams::background()
        };
        let result = api.delete(&fleet_name, &params).await;
        ctx.metrics.wrote(KIND, "delete");
        match result {
            Ok(_) => {
                info!(%namespace, gateway = %name, envoy = %fleet_name, "{}", why.says());
                deleted.push(fleet_name);
            }
            // Gone already, or replaced by another Envoy of that name: nothing of ours left.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(source) => return Err(api_error("delete", &fleet_name)(source)),
        }
    }
    Ok(deleted)
}

fn api_error(verb: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_owned();
    move |source| Error::Api { verb, kind: KIND, name, source }
}
