//! `envoy-operator install` / `uninstall`: the CRDs and the webhook configurations, applied
//! with server-side apply (idempotent: running it again changes nothing).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};

/// The field manager install writes with, distinct from the operator's own.
pub const FIELD_MANAGER: &str = "envoy-operator-install";

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("Kubernetes API: {0}")]
    Api(#[from] kube::Error),
    #[error("the CRD {name} was not Established within {waited:?}; last conditions: {conditions}")]
    NotEstablished { name: String, waited: Duration, conditions: String },
}

impl InstallError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api(_) => "api",
            Self::NotEstablished { .. } => "not_established",
        }
    }
}

/// What to install: the CRDs, then the webhook configurations (which refer to their kinds).
pub struct Manifests {
    pub crds: Vec<CustomResourceDefinition>,
    pub mutating: MutatingWebhookConfiguration,
    pub validating: ValidatingWebhookConfiguration,
}

/// Applies the CRDs, waits until each is Established, then applies the webhook configurations.
/// `progress` receives one line per step.
pub async fn install(
    client: &Client,
    manifests: &Manifests,
    establish_timeout: Duration,
    mut progress: impl FnMut(String),
) -> Result<(), InstallError> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in &manifests.crds {
        let name = crd.name_any();
        crds.patch(&name, &params, &Patch::Apply(crd)).await?;
        progress(format!("customresourcedefinition/{name} applied"));
    }
    for crd in &manifests.crds {
        let name = crd.name_any();
        wait_established(&crds, &name, establish_timeout).await?;
        progress(format!("customresourcedefinition/{name} established"));
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let name = manifests.mutating.name_any();
    mutating.patch(&name, &params, &Patch::Apply(&manifests.mutating)).await?;
    progress(format!("mutatingwebhookconfiguration/{name} applied"));
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = manifests.validating.name_any();
    validating.patch(&name, &params, &Patch::Apply(&manifests.validating)).await?;
    progress(format!("validatingwebhookconfiguration/{name} applied"));
    Ok(())
}

/// Polls a CRD until its `Established` condition is `True`.
async fn wait_established(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<(), InstallError> {
    let started = tokio::time::Instant::now();
    loop {
        let crd = crds.get(name).await?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        if conditions.iter().any(|c| c.type_ == "Established" && c.status == "True") {
            return Ok(());
        }
        let seen = conditions
            .iter()
            .map(|c| format!("{}={} ({})", c.type_, c.status, c.message.as_deref().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(", ");
        if started.elapsed() >= timeout {
            let conditions = if seen.is_empty() { "none".to_owned() } else { seen };
            return Err(InstallError::NotEstablished { name: name.to_owned(), waited: timeout, conditions });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Deletes the webhook configurations, and with `delete_crds` the CRDs too — which deletes
/// every Foo and Envoy in the cluster, and through their ownerReferences, their children.
pub async fn uninstall(
    client: &Client,
    manifests: &Manifests,
    delete_crds: bool,
    mut progress: impl FnMut(String),
) -> Result<(), InstallError> {
    let params = DeleteParams::default();
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let name = manifests.mutating.name_any();
    if mutating.delete(&name, &params).await.map(|_| Some(())).or_else(ignore_not_found)?.is_some() {
        progress(format!("mutatingwebhookconfiguration/{name} deleted"));
    }
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let name = manifests.validating.name_any();
    if validating.delete(&name, &params).await.map(|_| Some(())).or_else(ignore_not_found)?.is_some() {
        progress(format!("validatingwebhookconfiguration/{name} deleted"));
    }
    if delete_crds {
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in &manifests.crds {
            let name = crd.name_any();
            if crds.delete(&name, &params).await.map(|_| Some(())).or_else(ignore_not_found)?.is_some() {
                progress(format!("customresourcedefinition/{name} deleted"));
            }
        }
    }
    Ok(())
}

/// `Some(())` when deleted, `None` when it was already gone.
fn ignore_not_found(error: kube::Error) -> Result<Option<()>, kube::Error> {
    match error {
        kube::Error::Api(status) if status.code == 404 => Ok(None),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, StatusCode};
    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{expect, mock, not_found};

    fn manifests() -> Manifests {
        let named = |name: &str| kube::api::ObjectMeta { name: Some(name.to_owned()), ..Default::default() };
        Manifests {
            crds: crate::crd::all(),
            mutating: MutatingWebhookConfiguration { metadata: named("envoy-operator"), webhooks: None },
            validating: ValidatingWebhookConfiguration { metadata: named("envoy-operator"), webhooks: None },
        }
    }

    fn crd_with(established: &str) -> Value {
        let mut crd = serde_json::to_value(&crate::crd::all()[0]).unwrap();
        crd["status"] =
            json!({"conditions": [{"type": "Established", "status": established, "message": "waiting"}]});
        crd
    }

    const FOOS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io";
    const ENVOYS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/envoys.example.com";
    const MUTATING: &str =
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/envoy-operator";
    const VALIDATING: &str =
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/envoy-operator";

    #[tokio::test]
    async fn applies_crds_waits_for_them_then_applies_webhooks() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move {
            let mut lines = Vec::new();
            install(&client, &manifests(), Duration::from_secs(30), |line| lines.push(line))
                .await
                .map(|()| lines)
        });
        let applied = expect(&mut handle, Method::PATCH, FOOS, StatusCode::OK, crd_with("False")).await;
        assert_eq!(applied["kind"], "CustomResourceDefinition", "the CRD itself is applied");
        expect(&mut handle, Method::PATCH, ENVOYS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::GET, FOOS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::GET, FOOS, StatusCode::OK, crd_with("True")).await;
        expect(&mut handle, Method::GET, ENVOYS, StatusCode::OK, crd_with("True")).await;
        expect(&mut handle, Method::PATCH, MUTATING, StatusCode::OK, json!({})).await;
        expect(&mut handle, Method::PATCH, VALIDATING, StatusCode::OK, json!({})).await;
        let lines = task.await.unwrap().expect("installed");
        assert_eq!(lines.len(), 6);
        assert_eq!(lines[2], "customresourcedefinition/foos.samplecontroller.k8s.io established");
    }

    #[tokio::test]
    async fn a_crd_that_never_establishes_is_reported_with_its_conditions() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { install(&client, &manifests(), Duration::ZERO, |_| {}).await });
        expect(&mut handle, Method::PATCH, FOOS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::PATCH, ENVOYS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::GET, FOOS, StatusCode::OK, crd_with("False")).await;
        let error = task.await.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the CRD foos.samplecontroller.k8s.io was not Established within 0ns; last conditions: Established=False (waiting)"
        );
    }

    #[tokio::test]
    async fn uninstall_keeps_crds_unless_asked_and_tolerates_missing_objects() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move {
            let mut lines = Vec::new();
            uninstall(&client, &manifests(), false, |line| lines.push(line)).await.map(|()| lines)
        });
        expect(
            &mut handle,
            Method::DELETE,
            MUTATING,
            StatusCode::OK,
            json!({"kind": "Status", "status": "Success"}),
        )
        .await;
        expect(&mut handle, Method::DELETE, VALIDATING, StatusCode::NOT_FOUND, not_found()).await;
        let lines = task.await.unwrap().unwrap();
        assert_eq!(lines, ["mutatingwebhookconfiguration/envoy-operator deleted"]);
        assert!(handle.next_request().await.is_none(), "the CRDs (and every Foo and Envoy) are kept");
    }
}
