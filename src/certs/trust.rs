//! What fleets trust when they connect: the control plane's address and the CA bundle of the
//! certificate it serves (`ca.crt` of the certificate directory, which the Secret mirror or a
//! mounted Secret keeps current). The Envoy reconciler writes it into every fleet's bootstrap
//! ConfigMap; when a rotation changes the bundle, the ConfigMaps follow.

use std::path::PathBuf;
use std::time::Duration;

use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::children::envoy::ControlPlaneTrust;
use tokio::sync::watch;
use tracing::{info, warn};

/// How often the CA file is re-read. A rotation trusts the new CA long before anything serves a
/// certificate it signed, so a minute is plenty.
pub const CA_POLL_INTERVAL: Duration = Duration::from_secs(30);

/// A receiver of the current trust, and the task that keeps it current by re-reading `ca_file`
/// every `interval` (until every receiver is gone).
pub fn watch_ca_file(
    control_plane: ControlPlane,
    ca_file: PathBuf,
    interval: Duration,
) -> (watch::Receiver<ControlPlaneTrust>, impl Future<Output = ()> + Send + 'static) {
    let read = |file: &PathBuf| match std::fs::read_to_string(file) {
        Ok(pem) if crate::certs::pem::mentions_certificate(&pem) => Some(pem),
        Ok(_) => {
            warn!(file = %file.display(), "the CA file holds no certificate; fleets are not told to trust it");
            None
        }
        Err(error) => {
            warn!(file = %file.display(), %error, "cannot read the CA file fleets must trust");
            None
        }
    };
    let first = ControlPlaneTrust { control_plane, ca_pem: read(&ca_file) };
    let (sender, receiver) = watch::channel(first);
    let keep_current = async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = sender.closed() => return,
            }
            let Some(pem) = read(&ca_file) else { continue };
            sender.send_if_modified(|trust| {
                if trust.ca_pem.as_deref() == Some(pem.as_str()) {
                    return false;
                }
                info!(file = %ca_file.display(), "the control plane's CA bundle changed; fleets' bootstraps follow");
                trust.ca_pem = Some(pem);
                true
            });
        }
    };
    (receiver, keep_current)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    #[tokio::test(start_paused = true)]
    async fn the_trust_follows_the_ca_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.crt");
        std::fs::write(&file, CA).unwrap();
        let control_plane = ControlPlane { host: "envoy-operator-xds.ops.svc".into(), port: 18000 };
        let (mut trust, keep_current) =
            watch_ca_file(control_plane.clone(), file.clone(), Duration::from_secs(1));
        assert_eq!(trust.borrow().ca_pem.as_deref(), Some(CA));
        assert_eq!(trust.borrow().control_plane, control_plane);
        let task = tokio::spawn(keep_current);

        let rotated = format!("{CA}{CA}");
        std::fs::write(&file, &rotated).unwrap();
        trust.changed().await.unwrap();
        assert_eq!(trust.borrow_and_update().ca_pem.as_deref(), Some(rotated.as_str()));

        // An unreadable or empty file keeps the last good bundle.
        std::fs::write(&file, "").unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!trust.has_changed().unwrap());
        assert_eq!(trust.borrow().ca_pem.as_deref(), Some(rotated.as_str()));

        drop(trust);
        task.await.unwrap();
    }
}
