//! End-to-end tests against a real cluster (the current kubeconfig context). Ignored by
//! default; run with `cargo test --test e2e -- --ignored` (see the README, "End-to-end tests").
//!
//! Each test runs in a fresh namespace with the operator in-process (or, with
//! `E2E_IN_CLUSTER=1`, the deployed one) and cleans up after itself even when it fails; see
//! `envoy_operator_testkit::e2e` (the harness) and `harness.rs` (the operator it starts).
//! Checks that need running pods are skipped, with a note, on clusters without a schedulable
//! node.

mod harness;

mod admission;
mod envoy;
mod foo;
mod gateway;
mod identity;
mod inject;
mod leader;
mod proxy_lifecycle;
mod restart;
mod route;
