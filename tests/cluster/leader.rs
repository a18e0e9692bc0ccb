//! Leader election against an in-memory API server: a standby takes over a released Lease at
//! once, not when it would have expired, and says so once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use envoy_operator::ops::leader::{LeaseConfig, lead_with_lease};
use envoy_operator::ops::metrics::Metrics;
use envoy_operator_testkit::fake_api::FakeApi;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::logs::Captured;

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(30);
const LEASE_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases/envoy-operator-leader";

struct Replica {
    leading: Arc<AtomicBool>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// A replica whose work marks `leading` while it runs. Its Lease lasts an hour: a standby
/// that waited for it to expire would never take over within the test.
fn replica(api: &FakeApi, identity: &str) -> Replica {
    let leading = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = oneshot::channel::<()>();
    let config = LeaseConfig { duration_seconds: 3600, ..LeaseConfig::new("ops", identity) };
    let flag = leading.clone();
    let work = move |cancelled: CancellationToken| {
        let flag = flag.clone();
        async move {
            flag.store(true, Ordering::SeqCst);
            cancelled.cancelled().await;
            flag.store(false, Ordering::SeqCst);
        }
    };
    let client = api.client();
    let task = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        lead_with_lease(client, config, Metrics::new(), shutdown, work).await.expect("leader election runs");
    });
    Replica { leading, stop: Some(stop), task }
}

async fn until(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "waited {HANG_GUARD:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn holder(api: &FakeApi) -> Option<String> {
    api.get(LEASE_PATH)?["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn a_standby_takes_over_a_released_lease_before_it_would_expire() {
    let logs = Captured::default();
    let _logging = logs.start();
    let api = FakeApi::new();
    let mut first = replica(&api, "first");
    until("the first replica to lead", || first.leading.load(Ordering::SeqCst)).await;
    let second = replica(&api, "second");
    // The standby has read the Lease (held by the first) a few times.
    let lease_reads = || api.requests().iter().filter(|r| r.method == "GET" && r.path == LEASE_PATH).count();
    let before = lease_reads();
    until("the standby to look at the Lease", || lease_reads() >= before + 3).await;
    assert!(!second.leading.load(Ordering::SeqCst), "one leader at a time");
    assert_eq!(holder(&api).as_deref(), Some("first"));

    // A graceful stop releases the Lease; the standby takes it although it had an hour left,
    // once: a round trip to the API server as long as a real one's leaves its new lease
    // manager time to take the Lease before anything else looks at it.
    api.set_latency(Duration::from_millis(20));
    let _ = first.stop.take().expect("running").send(());
    tokio::time::timeout(HANG_GUARD, &mut first.task).await.expect("the first replica stops").unwrap();
    assert!(!first.leading.load(Ordering::SeqCst), "its work stopped");
    until("the standby to lead", || second.leading.load(Ordering::SeqCst)).await;
    assert_eq!(holder(&api).as_deref(), Some("second"));
    assert_eq!(logs.lines_with(&["the leader lease is free: taking it"]).len(), 1, "one takeover, told once");
    assert_eq!(logs.lines_with(&["became leader"]).len(), 2, "each replica once");
    second.task.abort();
}
