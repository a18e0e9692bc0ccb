//! End-to-end tests against a real cluster (the current kubeconfig context). Ignored by
//! default; run with `cargo test --test e2e -- --ignored` (see the README, "End-to-end tests").
//!
//! Each test runs in a fresh namespace with the operator in-process (or, with
//! `E2E_IN_CLUSTER=1`, the deployed one) and cleans up after itself even when it fails; see
//! `envoy_operator_testkit::e2e` (the harness) and `harness.rs` (the operator it starts).
//! Each story says in its doc comment which modes it applies to: where it applies and something
//! it needs is missing (a node that takes pods, the Gateway API CRDs, the deployed operator), it
//! fails saying so; it is skipped, with a note, only where a mode does not apply to it (or where
//! `E2E_NO_NODES=1` declares a cluster without nodes). Two tests here run without a cluster:
//! the load client's script and the mesh probe's, against servers on loopback (`load_client`,
//! `mesh`).

mod harness;

mod admission;
mod envoy;
mod foo;
mod gateway;
mod identity;
mod inject;
mod leader;
mod load_client;
mod mesh;
mod proxy_lifecycle;
mod restart;
mod route;
