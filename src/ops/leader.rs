//! Leader election: every replica serves the webhooks, but only the holder of a Lease in the
//! operator's namespace runs the controllers. The Lease is kept by kube-lease-manager (SSA,
//! conflict-safe); [`run_while_leading`] starts the work on gaining the lease, stops it on
//! losing it, and hands the lease back on shutdown; a standby polls the Lease while it waits
//! ([`STANDBY_POLL`]), so it takes over a released Lease within about a second instead of
//! when the old holder's lease would have expired. A crashed leader's Lease still has to
//! expire first (its duration, 15 s).

use std::future::Future;
use std::time::Duration;

use envoy_operator_core::names::{LEADER_LEASE, LEASE_FIELD_MANAGER};
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;
use tracing::{info, warn};

use super::logging::readable;
use super::metrics::Metrics;

/// How the Lease is held.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// Unique per replica: the pod name.
    pub identity: String,
    /// Seconds a holder may go without renewing before others may take the lease.
    pub duration_seconds: u64,
    /// Seconds before expiry at which the holder renews (tolerated clock skew).
    pub grace_seconds: u64,
}

impl LeaseConfig {
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: LEADER_LEASE.to_owned(),
            identity: identity.into(),
            duration_seconds: 15,
            grace_seconds: 5,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("leader election: {}", super::logging::readable(.0))]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
}

/// How often a standby looks at the Lease. kube-lease-manager's standby sleeps until the
/// holder's lease would expire, so on its own it takes over a *released* Lease only then (up to
/// the lease duration after a graceful handover); looking every second, it takes over at once.
pub const STANDBY_POLL: Duration = Duration::from_secs(1);

/// How long after it starts a manager is left to take a free Lease before the standby looks at
/// the Lease itself: longer than the manager's first attempt, which, for an expired Lease,
/// waits up to a second between releasing and taking it.
const FIRST_LOOK: Duration = Duration::from_secs(2);

/// Holds the Lease and runs `lead` while holding it, until `shutdown` resolves; then stops the
/// work and releases the Lease, so a standby takes over within [`STANDBY_POLL`].
pub async fn lead_with_lease<W, Fut>(
    client: Client,
    config: LeaseConfig,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
    lead: W,
) -> Result<(), LeaderError>
where
    W: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let candidate = Candidate::new(client, config.clone());
    // The first manager is built here, so a cluster that refuses the Lease fails the start.
    let first = candidate.manager().await?;
    let (sender, leading) = watch::channel(false);
    info!(lease = %config.name, identity = %config.identity, "waiting for the leader lease");
    let election = AbortOnDropHandle::new(tokio::spawn(candidate.elect(first, sender)));
    run_while_leading(leading, &metrics, shutdown, lead).await;
    // run_while_leading dropped the receiver: the election releases the lease and ends.
    match election.await {
        Ok(()) => info!("leader election ended; the lease is released"),
        Err(error) => warn!(%error, "the leader election task failed"),
    }
    Ok(())
}

/// What the candidate does after one manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Shut down: release and return.
    End,
    /// The manager stopped: start a new one.
    Restart,
    /// The Lease is free: a new manager, which reads it afresh and takes it.
    Take,
}

/// One replica's candidacy: kube-lease-manager holds and renews the Lease; while standing by,
/// the candidate also polls the Lease and, once it is free, starts a fresh manager, which takes
/// it at once.
#[derive(Clone)]
struct Candidate {
    client: Client,
    config: LeaseConfig,
    leases: Api<Lease>,
}

impl Candidate {
    fn new(client: Client, config: LeaseConfig) -> Self {
        let leases = Api::namespaced(client.clone(), &config.namespace);
        Self { client, config, leases }
    }

    async fn manager(&self) -> Result<LeaseManager, LeaderError> {
        let config = &self.config;
        Ok(LeaseManagerBuilder::new(self.client.clone(), &config.name)
            .with_namespace(&config.namespace)
            .with_parameters(
                LeaseParams::new(&config.identity, config.duration_seconds, config.grace_seconds)
                    .with_field_manager(LEASE_FIELD_MANAGER),
            )
            .build()
            .await?)
    }

    /// Forwards whether this replica leads to `sender` until every receiver is gone, then
    /// releases the Lease (when held) and returns.
    async fn elect(self, first: LeaseManager, sender: watch::Sender<bool>) {
        let mut manager = Some(first);
        let mut failures = 0u32;
        loop {
            let current = match manager.take() {
                Some(manager) => manager,
                None => match self.manager().await {
                    Ok(manager) => manager,
                    Err(error) => {
                        failures += 1;
                        warn!(%error, "starting the lease manager failed; retrying");
                        tokio::select! {
                            () = sender.closed() => return,
                            () = tokio::time::sleep(STANDBY_POLL * failures.min(10)) => continue,
                        }
                    }
                },
            };
            failures = 0;
            let (mut leading, task) = current.watch().await;
            let task = AbortOnDropHandle::new(task);
            // A fresh manager takes a free Lease by itself: looking at once would find it still
            // free before the manager's write lands, and abort that manager for another, over
            // and over. So the first look waits for the manager's first attempt.
            let first_look = tokio::time::Instant::now() + FIRST_LOOK;
            let mut polls = tokio::time::interval_at(first_look, STANDBY_POLL);
            polls.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let next = loop {
                tokio::select! {
                    () = sender.closed() => break Next::End,
                    changed = leading.changed() => {
                        if changed.is_err() {
                            warn!("the lease manager stopped; starting a new one");
                            break Next::Restart;
                        }
                        let _ = sender.send(*leading.borrow_and_update());
                    }
                    _ = polls.tick(), if !*leading.borrow() => {
                        if self.lease_is_free().await {
                            info!(lease = %self.config.name, "the leader lease is free: taking it");
                            break Next::Take;
                        }
                    }
                }
            };
            match next {
                // Dropping the receiver makes the manager's task release the lease if it holds
                // it, and end.
                Next::End | Next::Restart => {
                    drop(leading);
                    if let Ok(Err(error)) = task.await {
                        warn!(error = %readable(&error), "releasing the leader lease failed; it expires on its own");
                    }
                }
                // A standby holds nothing: stopped without a word, its task cannot race the new
                // manager (or another replica) with a release based on what it read earlier.
                Next::Take => task.abort(),
            }
            let _ = sender.send(false);
            if next == Next::End {
                return;
            }
        }
    }

    /// Whether nobody holds the Lease: released (no holder) or expired.
    async fn lease_is_free(&self) -> bool {
        let Ok(Some(lease)) = self.leases.get_opt(&self.config.name).await else { return false };
        let Some(spec) = lease.spec else { return true };
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        if holder.is_empty() {
            return true;
        }
        match (spec.renew_time, spec.lease_duration_seconds) {
            (Some(renewed), Some(seconds)) => {
                let expires =
                    std::time::SystemTime::from(renewed.0) + Duration::from_secs(seconds.max(0) as u64);
                expires < std::time::SystemTime::now()
            }
            _ => false,
        }
    }
}

/// How long stopped work may take to finish before it is abandoned.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `lead` whenever `leading` says true, cancelling it as soon as it says false or
/// `shutdown` resolves; returns after shutdown, dropping `leading`.
pub async fn run_while_leading<W, Fut>(
    mut leading: watch::Receiver<bool>,
    metrics: &Metrics,
    shutdown: impl Future<Output = ()>,
    mut lead: W,
) where
    W: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::pin!(shutdown);
    loop {
        // Wait to become leader.
        while !*leading.borrow_and_update() {
            tokio::select! {
                changed = leading.changed() => if changed.is_err() { return },
                () = &mut shutdown => return,
            }
        }
        info!("became leader: starting the controllers");
        metrics.set_leader(true);
        let stop = CancellationToken::new();
        // Aborted if this future is dropped, so the work never outlives its leader.
        let mut work = AbortOnDropHandle::new(tokio::spawn(lead(stop.clone())));
        let shutting_down = tokio::select! {
            _ = &mut work => {
                warn!("the controllers stopped on their own while leading");
                false
            }
            () = lost(&mut leading) => {
                warn!("lost the leader lease: stopping the controllers");
                false
            }
            () = &mut shutdown => true,
        };
        stop.cancel();
        if tokio::time::timeout(STOP_TIMEOUT, &mut work).await.is_err() {
            warn!("the controllers did not stop in time; abandoning them");
            work.abort();
        }
        metrics.set_leader(false);
        if shutting_down {
            return;
        }
    }
}

/// Resolves when `leading` turns false or its sender is gone.
async fn lost(leading: &mut watch::Receiver<bool>) {
    while *leading.borrow_and_update() {
        if leading.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Work that counts its starts and stops, and runs until cancelled.
    fn counting(
        starts: Arc<AtomicUsize>,
        stops: Arc<AtomicUsize>,
    ) -> impl FnMut(CancellationToken) -> futures::future::BoxFuture<'static, ()> {
        move |stop: CancellationToken| {
            let (starts, stops) = (starts.clone(), stops.clone());
            Box::pin(async move {
                starts.fetch_add(1, Ordering::SeqCst);
                stop.cancelled().await;
                stops.fetch_add(1, Ordering::SeqCst);
            })
        }
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    /// Clears its flag when dropped: shows whether the work is still alive.
    struct Alive(Arc<std::sync::atomic::AtomicBool>);

    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn dropping_the_leader_loop_ends_the_work_it_started() {
        let alive = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (_set_leading, leading) = watch::channel(true);
        let metrics = Metrics::new();
        let flag = alive.clone();
        let runner = tokio::spawn(async move {
            let work = move |_stop: CancellationToken| {
                let flag = flag.clone();
                async move {
                    flag.store(true, Ordering::SeqCst);
                    let _alive = Alive(flag);
                    std::future::pending::<()>().await; // ignores cancellation, like a stuck task
                }
            };
            run_while_leading(leading, &metrics, std::future::pending(), work).await
        });
        settle().await;
        assert!(alive.load(Ordering::SeqCst), "leading starts the work");
        runner.abort();
        let _ = runner.await;
        settle().await;
        assert!(!alive.load(Ordering::SeqCst), "the work must not outlive the dropped leader loop");
    }

    #[tokio::test]
    async fn work_runs_only_while_leading_and_stops_on_shutdown() {
        let (starts, stops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (set_leading, leading) = watch::channel(false);
        let (trigger_shutdown, shutdown) = tokio::sync::oneshot::channel::<()>();
        let metrics = Metrics::new();
        let runner = {
            let metrics = metrics.clone();
            let work = counting(starts.clone(), stops.clone());
            tokio::spawn(async move {
                run_while_leading(leading, &metrics, async { shutdown.await.unwrap_or(()) }, work).await
            })
        };

        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 0, "no work before the lease is held");

        set_leading.send(true).unwrap();
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
        assert!(metrics.encode().contains("envoy_operator_leader 1"));

        set_leading.send(false).unwrap();
        settle().await;
        assert_eq!(stops.load(Ordering::SeqCst), 1, "losing the lease stops the work");
        assert!(metrics.encode().contains("envoy_operator_leader 0"));

        set_leading.send(true).unwrap();
        settle().await;
        assert_eq!(starts.load(Ordering::SeqCst), 2, "regaining the lease starts it again");

        trigger_shutdown.send(()).unwrap();
        runner.await.unwrap();
        assert_eq!(stops.load(Ordering::SeqCst), 2, "shutdown stops the work before returning");
        assert!(set_leading.is_closed(), "the receiver is dropped, so the lease task releases the lease");
    }
}
