//! `envoy-operator install` / `uninstall`: the CRDs and the webhook configurations, applied
//! with server-side apply (idempotent: running it again changes nothing).

use std::time::Duration;

use envoy_operator_core::kube_version;
use envoy_operator_core::names::INSTALL_FIELD_MANAGER;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use super::logging::{KubeError, readable};

#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("Kubernetes API: {}", KubeError(.0))]
    Api(#[from] kube::Error),
    #[error("waiting for the CRD {name}: {}", readable(.source))]
    Wait { name: String, source: kube::runtime::wait::Error },
    #[error("the CRD {name} was not Established within {waited:?}; last conditions: {conditions}")]
    NotEstablished { name: String, waited: Duration, conditions: String },
    #[error(transparent)]
    UnsupportedKubernetes(#[from] kube_version::Unsupported),
}

impl InstallError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Api(_) => "api",
            Self::Wait { .. } => "wait",
            Self::NotEstablished { .. } => "not_established",
            Self::UnsupportedKubernetes(_) => "kubernetes_version",
        }
    }
}

/// What to install: the CRDs, then the webhook configurations (which refer to their kinds).
pub struct Manifests {
    pub crds: Vec<CustomResourceDefinition>,
    pub mutating: MutatingWebhookConfiguration,
    pub validating: ValidatingWebhookConfiguration,
}

/// Checks that the API server runs a supported Kubernetes version (nothing is applied to an
/// older one), applies the CRDs, waits until each is Established, then applies the webhook
/// configurations. `progress` receives one line per step.
pub async fn install(
    client: &Client,
    manifests: &Manifests,
    establish_timeout: Duration,
    mut progress: impl FnMut(String),
) -> Result<(), InstallError> {
    let version = client.apiserver_version().await?;
    progress(match kube_version::check(&version.major, &version.minor, &version.git_version)? {
        Some(supported) => format!("Kubernetes {} ({supported}): supported", version.git_version),
        None => "the API server does not say its Kubernetes version: taken for a supported one".to_owned(),
    });
    let params = PatchParams::apply(INSTALL_FIELD_MANAGER).force();
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

/// Waits (watching, as `kubectl wait` does) until a CRD's `Established` condition is `True`;
/// after `timeout`, says what the API server last reported.
async fn wait_established(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    timeout: Duration,
) -> Result<(), InstallError> {
    let established = await_condition(crds.clone(), name, conditions::is_crd_established());
    match tokio::time::timeout(timeout, established).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(source)) => Err(InstallError::Wait { name: name.to_owned(), source }),
        Err(_) => {
            let crd = crds.get_opt(name).await?;
            let conditions = crd.and_then(|crd| crd.status?.conditions).unwrap_or_default();
            let seen: Vec<String> = conditions
                .iter()
                .map(|c| format!("{}={} ({})", c.type_, c.status, c.message.as_deref().unwrap_or("")))
                .collect();
            let conditions = if seen.is_empty() { "none".to_owned() } else { seen.join(", ") };
            Err(InstallError::NotEstablished { name: name.to_owned(), waited: timeout, conditions })
        }
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
    use envoy_operator_testkit::mock::{expect_as_admin as expect, mock, not_found};

    fn manifests() -> Manifests {
        let named = |name: &str| kube::api::ObjectMeta { name: Some(name.to_owned()), ..Default::default() };
        Manifests {
            crds: envoy_operator_core::crd::all(),
            mutating: MutatingWebhookConfiguration { metadata: named("envoy-operator"), webhooks: None },
            validating: ValidatingWebhookConfiguration { metadata: named("envoy-operator"), webhooks: None },
        }
    }

    fn crd_with(established: &str) -> Value {
        crd_n_with(0, established)
    }

    fn crd_n_with(n: usize, established: &str) -> Value {
        let mut crd = serde_json::to_value(&envoy_operator_core::crd::all()[n]).unwrap();
        crd["metadata"]["resourceVersion"] = json!("5");
        crd["status"] =
            json!({"conditions": [{"type": "Established", "status": established, "message": "waiting"}]});
        crd
    }

    /// The answer to the initial LIST of a watch of one CRD.
    fn list_of(crd: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList",
               "metadata": {"resourceVersion": "5"}, "items": [crd]})
    }

    /// Answers the watch that follows the LIST with one change of the CRD, as a watch stream.
    async fn watch_sends(handle: &mut envoy_operator_testkit::mock::Handle, crd: Value) {
        let (request, respond) = handle.next_request().await.expect("the client is alive");
        assert_eq!((request.method(), request.uri().path()), (&Method::GET, CRDS));
        assert!(request.uri().query().unwrap_or_default().contains("watch=true"), "{}", request.uri());
        let event = serde_json::to_vec(&json!({"type": "MODIFIED", "object": crd})).unwrap();
        respond.send_response(http::Response::builder().body(kube::client::Body::from(event)).unwrap());
    }

    const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    const FOOS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io";
    const ENVOYS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/envoys.example.com";
    const ROUTES: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/envoyroutes.example.com";
    const MUTATING: &str =
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/envoy-operator";
    const VALIDATING: &str =
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/envoy-operator";

    const VERSION: &str = "/version";

    fn version(major: &str, minor: &str, git_version: &str) -> Value {
        json!({"major": major, "minor": minor, "gitVersion": git_version, "gitCommit": "", "gitTreeState": "clean",
               "buildDate": "", "goVersion": "", "compiler": "gc", "platform": "linux/amd64"})
    }

    #[tokio::test]
    async fn applies_crds_waits_for_them_then_applies_webhooks() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move {
            let mut lines = Vec::new();
            install(&client, &manifests(), Duration::from_secs(30), |line| lines.push(line))
                .await
                .map(|()| lines)
        });
        expect(&mut handle, Method::GET, VERSION, StatusCode::OK, version("1", "32+", "v1.32.2-eks-1")).await;
        let applied = expect(&mut handle, Method::PATCH, FOOS, StatusCode::OK, crd_with("False")).await;
        assert_eq!(applied["kind"], "CustomResourceDefinition", "the CRD itself is applied");
        expect(&mut handle, Method::PATCH, ENVOYS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::PATCH, ROUTES, StatusCode::OK, crd_with("False")).await;
        // Foos: listed not yet Established, then the watch reports it Established.
        expect(&mut handle, Method::GET, CRDS, StatusCode::OK, list_of(crd_with("False"))).await;
        watch_sends(&mut handle, crd_with("True")).await;
        // Envoys and EnvoyRoutes: Established when first listed.
        expect(&mut handle, Method::GET, CRDS, StatusCode::OK, list_of(crd_n_with(1, "True"))).await;
        expect(&mut handle, Method::GET, CRDS, StatusCode::OK, list_of(crd_n_with(2, "True"))).await;
        expect(&mut handle, Method::PATCH, MUTATING, StatusCode::OK, json!({})).await;
        expect(&mut handle, Method::PATCH, VALIDATING, StatusCode::OK, json!({})).await;
        let lines = task.await.unwrap().expect("installed");
        assert_eq!(lines.len(), 9);
        assert_eq!(lines[0], "Kubernetes v1.32.2-eks-1 (1.32): supported");
        assert_eq!(lines[4], "customresourcedefinition/foos.samplecontroller.k8s.io established");
    }

    #[tokio::test]
    async fn an_api_server_older_than_the_minimum_gets_nothing_applied() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { install(&client, &manifests(), Duration::ZERO, |_| {}).await });
        expect(&mut handle, Method::GET, VERSION, StatusCode::OK, version("1", "27", "v1.27.16")).await;
        let error = task.await.unwrap().unwrap_err();
        assert_eq!(error.metric_label(), "kubernetes_version");
        let message = error.to_string();
        assert!(
            message.contains("Kubernetes v1.27.16 (1.27)") && message.contains("needs 1.28 or newer"),
            "{message}"
        );
        assert!(handle.next_request().await.is_none(), "no CRD or webhook configuration is applied");
    }

    #[tokio::test]
    async fn a_crd_that_never_establishes_is_reported_with_its_conditions() {
        let (client, mut handle) = mock();
        let task = tokio::spawn(async move { install(&client, &manifests(), Duration::ZERO, |_| {}).await });
        expect(&mut handle, Method::GET, VERSION, StatusCode::OK, version("1", "28", "v1.28.0")).await;
        expect(&mut handle, Method::PATCH, FOOS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::PATCH, ENVOYS, StatusCode::OK, crd_with("False")).await;
        expect(&mut handle, Method::PATCH, ROUTES, StatusCode::OK, crd_with("False")).await;
        // The watch may get its LIST out before the (zero) timeout: it is never answered.
        let mut unanswered = Vec::new();
        loop {
            let (request, respond) = handle.next_request().await.expect("the client is alive");
            if request.uri().path() == CRDS {
                unanswered.push(respond);
                continue;
            }
            assert_eq!((request.method(), request.uri().path()), (&Method::GET, FOOS));
            let body = kube::client::Body::from(serde_json::to_vec(&crd_with("False")).unwrap());
            respond.send_response(http::Response::builder().body(body).unwrap());
            break;
        }
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
        assert!(
            handle.next_request().await.is_none(),
            "the CRDs (and every Foo, Envoy and EnvoyRoute) are kept"
        );
    }
}
