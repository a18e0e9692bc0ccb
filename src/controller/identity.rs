//! A fleet's identity Secret: the client certificate its proxies prove their fleet with on the
//! xDS port, issued by the operator's identity CA and renewed at half its life or when the CA
//! changes.
//!
//! The operator may write Secrets of the identity label but not read any (RBAC cannot grant
//! reading by label, and reading every Secret of every namespace is more than a proxy's
//! certificate is worth). So it decides renewals from a record on the fleet's Deployment
//! ([`IssuedIdentity`]), which it reads from its cache, and writes the Secret with server-side
//! apply, which needs no read.

use std::collections::BTreeMap;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::identity::{self, FleetIdentity, IssuedIdentity};
use envoy_operator_core::names::{
    FIELD_MANAGER, MANAGED_BY, MANAGED_BY_KEY, XDS_IDENTITY_ISSUED_ANNOTATION, XDS_IDENTITY_SECRET_LABEL,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use time::OffsetDateTime;
use tracing::info;

use super::{Context, Error, Result};
use crate::certs::identity_ca::{IdentityCa, IssuedCertificate};

/// The record of the identity the fleet holds, once it is current: issued now (and the Secret
/// written) when none is recorded on the fleet's Deployment `deployment`, when another CA
/// issued it, or when it is due for renewal.
async fn ensure(
    ctx: &Context,
    envoy: &Envoy,
    issuer: &IdentityCa,
    deployment: &str,
) -> Result<IssuedIdentity> {
    let namespace = envoy.namespace().unwrap_or_default();
    let recorded = ctx
        .stores
        .deployments
        .get(&ObjectRef::<Deployment>::new(deployment).within(&namespace))
        .and_then(|deployment| recorded(&deployment));
    let now = OffsetDateTime::now_utc();
    if let Some(recorded) =
        recorded.filter(|r| !IssuedIdentity::is_due(Some(r), issuer.fingerprint(), now.unix_timestamp()))
    {
        return Ok(recorded);
    }
    let fleet = FleetIdentity::new(&namespace, envoy.name_any());
    let issued = issuer.issue(&fleet, now).map_err(|error| Error::Identity(error.to_string()))?;
    let secret = fleet_secret(envoy, &issued);
    let name = identity::secret_name(&fleet.name);
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
    // Forced: the Secret is the operator's alone (its label and owner say so), and a Secret
    // someone else left under this name must not keep the fleet from its identity.
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&secret))
        .await
        .map_err(|source| Error::Api { verb: "apply", kind: "Secret", name: name.clone(), source })?;
    ctx.metrics.wrote("Secret", "apply");
    info!(%namespace, envoy = %fleet.name, secret = %name, issuer = issuer.fingerprint(), "issued the fleet's xDS client certificate");
    Ok(issued.record)
}

/// For a fleet of the operator's control plane (`served`, with an issuer), makes sure its
/// identity is current and records it on `deployment` (the desired fleet Deployment); returns
/// how long until it is due for renewal.
pub(super) async fn attach(
    ctx: &Context,
    envoy: &Envoy,
    served: bool,
    deployment: &mut Deployment,
) -> Result<Option<std::time::Duration>> {
    let Some(issuer) = ctx.identity_issuer.as_ref().filter(|_| served) else { return Ok(None) };
    let issuer = issuer.borrow().clone();
    let issued = ensure(ctx, envoy, &issuer, &deployment.name_any()).await?;
    deployment.metadata.annotations.get_or_insert_default().extend(record(&issued));
    let left = issued.renew_after - OffsetDateTime::now_utc().unix_timestamp();
    Ok(Some(std::time::Duration::from_secs(u64::try_from(left).unwrap_or(0))))
}

/// The record a fleet's Deployment carries, if any.
fn recorded(deployment: &Deployment) -> Option<IssuedIdentity> {
    deployment
        .annotations()
        .get(XDS_IDENTITY_ISSUED_ANNOTATION)
        .and_then(|value| IssuedIdentity::parse(value))
}

/// The annotations that record `issued` on the fleet's Deployment.
fn record(issued: &IssuedIdentity) -> BTreeMap<String, String> {
    BTreeMap::from([(XDS_IDENTITY_ISSUED_ANNOTATION.to_owned(), issued.annotation())])
}

/// The identity Secret of `envoy`: `kubernetes.io/tls` (the certificate and key), and the SDS
/// file proxies read them from. Owned by the Envoy, so it goes with it.
pub fn fleet_secret(envoy: &Envoy, issued: &IssuedCertificate) -> Secret {
    let name = envoy.name_any();
    let data = [
        ("tls.crt", issued.cert_pem.clone()),
        ("tls.key", issued.key_pem.clone()),
        (identity::SDS_KEY, identity_sds_file(&issued.cert_pem, &issued.key_pem)),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), ByteString(value.into_bytes())))
    .collect();
    Secret {
        metadata: ObjectMeta {
            name: Some(identity::secret_name(&name)),
            namespace: envoy.namespace(),
            labels: Some(BTreeMap::from([
                (MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned()),
                (XDS_IDENTITY_SECRET_LABEL.to_owned(), name),
            ])),
            owner_references: envoy.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(data),
        ..Default::default()
    }
}
