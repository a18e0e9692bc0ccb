//! Leader handover with two in-process replicas on a real API server: after a graceful stop
//! the standby takes over at once (it polls the released Lease every second), after a crash
//! only once the Lease expires (its duration, 15 s). Both are measured and printed; what is
//! asserted is the order of the Lease's own timestamps, not how long anything took here.
//!
//! As a deployed operator's Service does, one address stands for every replica's webhooks (the
//! harness's `WebhookFront`): the Foos created after each handover are admitted by whichever
//! replica is still up. In-process only: with `E2E_IN_CLUSTER=1` the story does not apply (the
//! deployed replicas are not this test's to stop) and is skipped with a note.

use std::time::{Duration, Instant};

use envoy_operator_core::api::Foo;
use envoy_operator_core::names::LEADER_LEASE;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use crate::foo::foo_manifest;
use crate::harness::{LEASE, Operator, SHORT, get, in_cluster, in_cluster_mode, wait_for};

/// The Lease's holder and when it was acquired and last renewed.
async fn lease(leases: &Api<Lease>) -> Result<(String, Option<f64>, Option<f64>), String> {
    let lease = leases.get(LEADER_LEASE).await.map_err(|e| e.to_string())?;
    let spec = lease.spec.unwrap_or_default();
    let seconds = |time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime>| {
        time.map(|t| t.0.as_millisecond() as f64 / 1000.0)
    };
    Ok((spec.holder_identity.unwrap_or_default(), seconds(spec.acquire_time), seconds(spec.renew_time)))
}

/// Waits until `identity` holds the Lease; returns when it was acquired (server time).
async fn held_by(leases: &Api<Lease>, identity: &str, within: Duration) -> f64 {
    wait_for(&format!("{identity} to hold the Lease {LEADER_LEASE}"), within, || async {
        match lease(leases).await? {
            (holder, Some(acquired), _) if holder == identity => Ok(acquired),
            other => Err(format!("(holder, acquired, renewed): {other:?}")),
        }
    })
    .await
}

/// Waits until a new Foo's Deployment exists: the leader reconciles.
async fn reconciled(cluster: &crate::harness::Cluster, name: &str, within: Duration) {
    let _: Foo = cluster.create(foo_manifest(name, name, 1)).await;
    let deployments = cluster.api::<Deployment>();
    wait_for(&format!("the Deployment of Foo {name}"), within, || get(&deployments, name)).await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_standby_takes_over_at_once_after_a_graceful_stop_and_after_the_lease_after_a_crash() {
    in_cluster("leader", async |cluster| {
        if in_cluster_mode() {
            eprintln!("note: E2E_IN_CLUSTER=1: the deployed replicas are not stopped by this test; skipped");
            return;
        }
        let setup = cluster.setup.clone().expect("in-process mode");
        let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), &setup.operator_namespace);
        let first = cluster.operator.lock().await.take().expect("the operator");
        held_by(&leases, &first.identity, SHORT).await;
        reconciled(cluster, "before", SHORT).await;
        // Two standbys, each with a webhook port of its own.
        let standby = |n: u32| {
            let setup = setup.another_replica();
            let identity = format!("e2e-{}-standby-{n}", cluster.run_id);
            async move { Operator::start(&setup, &identity).await }
        };
        let second = standby(2).await;
        let third = standby(3).await;
        assert_eq!(setup.front.replicas().len(), 3, "every replica behind the webhooks' one address");

        // Graceful: the leader releases the Lease; a standby takes it at once.
        let (_, _, last_renewed) = lease(&leases).await.expect("the Lease");
        let stopping = Instant::now();
        first.stop().await;
        let wait = SHORT;
        let taken = wait_for("a standby to take the released Lease", wait, || async {
            match lease(&leases).await? {
                (holder, Some(acquired), _) if holder == second.identity || holder == third.identity => {
                    Ok((holder, acquired))
                }
                other => Err(format!("(holder, acquired, renewed): {other:?}")),
            }
        })
        .await;
        let handover = stopping.elapsed();
        reconciled(cluster, "after-stop", SHORT).await;
        let serving = stopping.elapsed();
        eprintln!(
            "measured: graceful handover to {} in {:.1} s (reconciling a new Foo {:.1} s after the stop began)",
            taken.0,
            handover.as_secs_f64(),
            serving.as_secs_f64()
        );
        if let Some(renewed) = last_renewed {
            assert!(
                taken.1 < renewed + LEASE.as_secs_f64(),
                "the standby waited for the released Lease to expire: acquired {} s after its last renewal",
                taken.1 - renewed
            );
        }

        // A crash: nothing is released; the other standby takes over once the Lease expires.
        let (leader, other) = if taken.0 == second.identity { (second, third) } else { (third, second) };
        let (_, _, renewed) = lease(&leases).await.expect("the Lease");
        let crashing = Instant::now();
        leader.kill();
        let acquired = held_by(&leases, &other.identity, SHORT + LEASE).await;
        let takeover = crashing.elapsed();
        reconciled(cluster, "after-crash", SHORT).await;
        eprintln!(
            "measured: after a crash, {} took over in {:.1} s (Lease {} s); reconciling {:.1} s after the crash",
            other.identity,
            takeover.as_secs_f64(),
            LEASE.as_secs(),
            crashing.elapsed().as_secs_f64()
        );
        if let Some(renewed) = renewed {
            // As designed: a crashed leader's Lease is taken only once it expired.
            assert!(
                acquired >= renewed + LEASE.as_secs_f64() - 1.0,
                "taken over {} s after the crashed leader's last renewal, before the Lease expired",
                acquired - renewed
            );
        }
        other.stop().await;
    })
    .await;
}
