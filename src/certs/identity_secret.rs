//! The identity CA in the cluster: every replica makes sure its Secret exists (create-only, so
//! replicas racing at first start converge on the one that won) and follows it (its xDS server
//! trusts the bundle, its reconcilers issue with the key); the leader rotates it when due, or
//! makes a new one when the Secret is gone.

use std::sync::Arc;
use std::time::Duration;

use envoy_operator_core::names::XDS_IDENTITY_CA_SECRET;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use time::OffsetDateTime;
use tokio::sync::watch;
use tracing::{error, info, warn};

use super::identity_ca::IdentityCa;
use crate::certs::webhook_secret::CertError;
use crate::ops::logging::readable;

/// Gets the identity CA, creating its Secret when absent. When another replica creates it
/// first, uses theirs.
pub async fn ensure(client: &Client, namespace: &str) -> Result<IdentityCa, CertError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    if let Some(secret) = secrets.get_opt(XDS_IDENTITY_CA_SECRET).await? {
        return IdentityCa::from_secret(&secret);
    }
    let ca = IdentityCa::generate(OffsetDateTime::now_utc())?;
    match secrets.create(&PostParams::default(), &ca.to_secret(namespace)).await {
        Ok(_) => {
            info!(secret = XDS_IDENTITY_CA_SECRET, %namespace, "created the xDS identity CA");
            Ok(ca)
        }
        Err(kube::Error::Api(status)) if status.code == 409 => {
            info!(secret = XDS_IDENTITY_CA_SECRET, %namespace, "another replica created the xDS identity CA first; using theirs");
            IdentityCa::from_secret(&secrets.get(XDS_IDENTITY_CA_SECRET).await?)
        }
        Err(error) => Err(error.into()),
    }
}

/// Keeps `current` equal to the Secret (until every receiver is gone). A Secret that cannot be
/// used is logged and the last good CA kept.
pub async fn follow(client: Client, namespace: String, current: watch::Sender<Arc<IdentityCa>>) {
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={XDS_IDENTITY_CA_SECRET}"));
    let mut events = std::pin::pin!(watcher(secrets, config).default_backoff().applied_objects());
    loop {
        let secret = tokio::select! {
            () = current.closed() => return,
            event = events.next() => match event {
                Some(Ok(secret)) => secret,
                Some(Err(error)) => {
                    warn!(error = %readable(&error), secret = XDS_IDENTITY_CA_SECRET, "watching the xDS identity CA failed; retrying");
                    continue;
                }
                None => return,
            },
        };
        match IdentityCa::from_secret(&secret) {
            Ok(ca) => {
                current.send_if_modified(|held| {
                    let changed =
                        held.fingerprint() != ca.fingerprint() || held.trust_bundle() != ca.trust_bundle();
                    if changed {
                        info!(fingerprint = ca.fingerprint(), "the xDS identity CA changed");
                        *held = Arc::new(ca);
                    }
                    changed
                });
            }
            Err(error) => {
                error!(%error, secret = %secret.name_any(), "ignoring an unusable xDS identity CA Secret")
            }
        }
    }
}

/// The leader's upkeep, every `interval`: rotates the CA when a third of its validity is left,
/// and makes a new one when the Secret is gone. Replicas pick either up through [`follow`].
pub async fn maintain(client: Client, namespace: String, interval: Duration) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = rotate_if_due(&client, &secrets, &namespace).await {
            warn!(error = %readable(&error), secret = XDS_IDENTITY_CA_SECRET, "keeping the xDS identity CA current failed; retrying");
        }
    }
}

async fn rotate_if_due(client: &Client, secrets: &Api<Secret>, namespace: &str) -> Result<(), CertError> {
    let Some(secret) = secrets.get_opt(XDS_IDENTITY_CA_SECRET).await? else {
        warn!(
            secret = XDS_IDENTITY_CA_SECRET,
            "the xDS identity CA Secret is gone; making a new CA (fleets get new certificates)"
        );
        ensure(client, namespace).await?;
        return Ok(());
    };
    let ca = IdentityCa::from_secret(&secret)?;
    let now = OffsetDateTime::now_utc();
    if !ca.needs_rotation(now)? {
        return Ok(());
    }
    let rotated = ca.rotated(now)?;
    let mut replacement = rotated.to_secret(namespace);
    // Guarded by the resourceVersion: a concurrent change fails this (retried next time)
    // instead of being overwritten.
    replacement.metadata.resource_version = secret.metadata.resource_version.clone();
    secrets.replace(XDS_IDENTITY_CA_SECRET, &PostParams::default(), &replacement).await?;
    info!(
        fingerprint = rotated.fingerprint(),
        "rotated the xDS identity CA; fleets get certificates of the new one"
    );
    Ok(())
}
