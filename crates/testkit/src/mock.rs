//! A mock Kubernetes API server for unit tests (kube-rs' `ApiServerVerifier` pattern): each
//! expected request is asserted in order and answered; a request that never comes fails the
//! test after a timeout instead of hanging it.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

pub type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

pub fn mock() -> (Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), handle)
}

/// Expects the next request to be `method path`, answers `status body`, and returns the
/// request's JSON body (`null` when empty). The request must be one the operator's cluster-wide
/// RBAC allows (an apply may create).
pub async fn expect(
    handle: &mut Handle,
    method: Method,
    path: &str,
    status: StatusCode,
    body: Value,
) -> Value {
    expect_request(handle, method, path, status, body, true).await
}

/// [`expect`] for requests a cluster administrator makes (`install`), which the operator's
/// RBAC rightly does not allow.
pub async fn expect_as_admin(
    handle: &mut Handle,
    method: Method,
    path: &str,
    status: StatusCode,
    body: Value,
) -> Value {
    expect_request(handle, method, path, status, body, false).await
}

async fn expect_request(
    handle: &mut Handle,
    method: Method,
    path: &str,
    status: StatusCode,
    body: Value,
    as_operator: bool,
) -> Value {
    let (request, respond) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .unwrap_or_else(|_| panic!("no request arrived; expected {method} {path}"))
        .expect("the client is alive");
    assert_eq!((request.method(), request.uri().path()), (&method, path), "unexpected request");
    let content_type =
        request.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let query = request.uri().query().unwrap_or_default();
    if as_operator {
        let install = crate::rbac::cluster_wide();
        for access in crate::rbac::accesses(method.as_str(), path, query, &content_type, false) {
            assert!(!install.allowing(&access).is_empty(), "deploy/rbac.yaml does not allow {access}");
        }
    }
    let bytes = request.into_body().collect_bytes().await.expect("a readable body");
    let sent =
        if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
    let response =
        Response::builder().status(status).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap();
    respond.send_response(response);
    sent
}

/// The API server's 404 body.
pub fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"})
}
