//! The operator's parts against the in-memory API server (`envoy_operator_testkit::fake_api`):
//! the reconcilers, the route controller, leader election, the Kubernetes version check, and
//! every request checked against the RBAC of `deploy/`. One test binary.

mod controllers;
mod gateway_publish;
mod gateways;
mod kube_version;
mod leader;
mod logs;
mod rbac;
mod reconcile;
mod route_events;
mod routes;
mod terminating;
