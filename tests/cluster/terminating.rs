//! A namespace being deleted, against an in-memory API server that refuses creates in it as the
//! API server does (403, cause `NamespaceTerminating`): the controllers stop at the refusal,
//! with no failed reconcile (so no backoff, no WARN), and say so once per namespace.

use std::sync::Mutex;
use std::time::Duration;

use envoy_operator::controller::ReconcileMetrics;
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::{Value, json};

use crate::controllers::{self, HANG_GUARD};
use crate::logs::Captured;

const NS: &str = "shop";

/// Every finished reconcile: its kind, and its error's label if it failed.
#[derive(Default)]
struct Reconciles(Mutex<Vec<(&'static str, Option<&'static str>)>>);

impl ReconcileMetrics for Reconciles {
    fn reconciled(&self, kind: &'static str, error: Option<&'static str>, _elapsed: Duration) {
        self.0.lock().unwrap().push((kind, error));
    }
}

type Controllers = controllers::Controllers<Reconciles>;

fn deployments(api: &FakeApi) -> Vec<Value> {
    api.list(&format!("/apis/apps/v1/namespaces/{NS}/deployments"))
}

/// The applies of a Deployment the API server refused: those that would have created it.
fn refused_applies(api: &FakeApi, since: usize) -> usize {
    let requests = api.requests();
    requests[since..]
        .iter()
        .filter(|r| r.method == "PATCH" && r.target.resource == "deployments" && !r.existed)
        .count()
}

#[tokio::test]
async fn children_are_not_recreated_in_a_namespace_being_deleted_and_that_is_no_failure() {
    let logs = Captured::default();
    let _logging = logs.start();
    let api = FakeApi::new();
    api.put(
        &format!("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{NS}/foos/web"),
        json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {},
               "spec": {"deploymentName": "web", "replicas": 1}}),
    );
    api.put(
        &format!("/apis/example.com/v1/namespaces/{NS}/envoys/edge"),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {},
               "spec": {"configMapName": "edge-cfg", "xds": {"host": "xds.mesh", "port": 18000}}}),
    );
    let controllers = Controllers::start(&api, None);
    api.wait_for("both Deployments", HANG_GUARD, |api| deployments(api).len() == 2).await;

    // The namespace is deleted: its objects go one by one, the children first here, and each
    // deletion reconciles the parent, which would apply the child again.
    api.terminate_namespace(NS);
    let since = api.requests().len();
    let reconciles_before = controllers.reconciles.0.lock().unwrap().len();
    for deployment in deployments(&api) {
        let name = deployment["metadata"]["name"].as_str().expect("a name").to_owned();
        api.delete(&format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}"));
    }
    api.wait_for("both applies refused", HANG_GUARD, |api| refused_applies(api, since) >= 2).await;
    // Each refused reconcile is over once a Foo and an Envoy reconcile finished after it.
    api.wait_for("the refused reconciles finished", HANG_GUARD, |_| {
        let reconciles = controllers.reconciles.0.lock().unwrap();
        let after = &reconciles[reconciles_before..];
        after.iter().any(|(kind, _)| *kind == "Foo") && after.iter().any(|(kind, _)| *kind == "Envoy")
    })
    .await;

    assert!(deployments(&api).is_empty(), "nothing created in the namespace");
    let failed: Vec<_> = controllers
        .reconciles
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, error)| error.is_some())
        .copied()
        .collect();
    assert_eq!(failed, [], "a refusal for a namespace being deleted is no failed reconcile");
    assert_eq!(logs.lines_with(&["WARN"]), Vec::<String>::new(), "nothing to warn about");
    let told = logs.lines_with(&["INFO", "the namespace is being deleted", "namespace=\"shop\""]);
    assert_eq!(told.len(), 1, "said once for the namespace: {told:?}");
    controllers.stop().await;
}
