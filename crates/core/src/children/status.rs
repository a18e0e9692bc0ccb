//! Pure status computation: what a Foo's or an Envoy's status should say, given the
//! Deployment the cluster holds and anything that stopped the children from being applied.
//!
//! Conditions (types and reasons in CamelCase, as Kubernetes conventions ask):
//! - `Ready`: every desired replica is available (`kubectl wait --for=condition=Ready`).
//! - `Progressing`: a rollout is under way (the Deployment has not observed its latest spec,
//!   or not every replica is updated and available yet, or old pods are still running).
//! - `Degraded`: something needs a human: an invalid spec, a name clash with an object we do
//!   not control, or a failed rollout (`ReplicaFailure`, `ProgressDeadlineExceeded`).
//!
//! `lastTransitionTime` changes only when a condition's status changes, so a status computed
//! twice from the same observation is identical and the reconciler writes nothing.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::api::{Envoy, EnvoyStatus, Foo, FooStatus};
use crate::rules::Defaulted;

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const DEGRADED: &str = "Degraded";

/// Reason for a child name held by an object this parent does not control (the
/// sample-controller's `ErrResourceExists`).
pub const REASON_RESOURCE_EXISTS: &str = "ErrResourceExists";
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// Reason for a Service cluster IP (`spec.serviceClusterIP`) the API server refuses: outside
/// the cluster's Service range, or held by another Service.
pub const REASON_ADDRESS_NOT_USABLE: &str = "AddressNotUsable";

/// Why the children were not applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blocker {
    /// The spec fails the rule engine (possible when the webhook was down).
    InvalidSpec { message: String },
    /// A child's name is taken by an object this parent does not control.
    NameClash { message: String },
    /// The API server refuses the Service's cluster IP; its words.
    AddressNotUsable { message: String },
}

impl Blocker {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::InvalidSpec { .. } => REASON_INVALID_SPEC,
            Self::NameClash { .. } => REASON_RESOURCE_EXISTS,
            Self::AddressNotUsable { .. } => REASON_ADDRESS_NOT_USABLE,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Self::InvalidSpec { message }
            | Self::NameClash { message }
            | Self::AddressNotUsable { message } => message,
        }
    }
}

/// The current time at the one-second precision `metav1.Time` serializes with, so a status
/// computed now compares equal to the same status read back.
pub fn now() -> Time {
    Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// What a Deployment's status says about its rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    pub name: String,
    pub desired: i32,
    pub replicas: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    /// The Deployment controller has seen the latest Deployment spec.
    pub observed: bool,
    /// `ReplicaFailure` or `ProgressDeadlineExceeded`: reason and message.
    pub failure: Option<(String, String)>,
}

impl Rollout {
    /// The rollout of `deployment` towards the parent's `desired` replicas.
    pub fn of(deployment: &Deployment, desired: i32) -> Self {
        let status = deployment.status.clone().unwrap_or_default();
        let observed = match (status.observed_generation, deployment.metadata.generation) {
            (Some(seen), Some(generation)) => seen >= generation,
            (_, None) => true,
            (None, Some(_)) => false,
        };
        let failure = status.conditions.iter().flatten().find_map(|c| {
            let failed = (c.type_ == "ReplicaFailure" && c.status == "True")
                || (c.type_ == "Progressing" && c.reason.as_deref() == Some("ProgressDeadlineExceeded"));
            failed.then(|| {
                let reason = c.reason.clone().unwrap_or_else(|| c.type_.clone());
                (reason, c.message.clone().unwrap_or_default())
            })
        });
        Self {
            name: deployment.metadata.name.clone().unwrap_or_default(),
            desired,
            replicas: status.replicas.unwrap_or(0),
            updated: status.updated_replicas.unwrap_or(0),
            ready: status.ready_replicas.unwrap_or(0),
            available: status.available_replicas.unwrap_or(0),
            observed,
            failure,
        }
    }

    fn all_available(&self) -> bool {
        self.available >= self.desired
    }

    fn in_progress(&self) -> bool {
        !self.observed || self.updated < self.desired || self.replicas > self.updated || !self.all_available()
    }
}

/// One condition's target state.
struct Target<'a> {
    type_: &'static str,
    status: bool,
    reason: &'a str,
    message: String,
}

/// The three conditions for a parent at `generation`, keeping each previous condition's
/// `lastTransitionTime` unless its status changes.
pub fn conditions(
    previous: &[Condition],
    generation: Option<i64>,
    blocker: Option<&Blocker>,
    rollout: Option<&Rollout>,
    now: &Time,
) -> Vec<Condition> {
    let targets = match (blocker, rollout) {
        (Some(blocker), _) => [
            Target {
                type_: READY,
                status: false,
                reason: blocker.reason(),
                message: blocker.message().to_owned(),
            },
            Target {
                type_: PROGRESSING,
                status: false,
                reason: blocker.reason(),
                message: "the children cannot be applied until this is resolved".to_owned(),
            },
            Target {
                type_: DEGRADED,
                status: true,
                reason: blocker.reason(),
                message: blocker.message().to_owned(),
            },
        ],
        (None, None) => [
            Target {
                type_: READY,
                status: false,
                reason: "DeploymentMissing",
                message: "the Deployment does not exist yet".to_owned(),
            },
            Target {
                type_: PROGRESSING,
                status: true,
                reason: "DeploymentMissing",
                message: "the Deployment does not exist yet".to_owned(),
            },
            Target { type_: DEGRADED, status: false, reason: "AsExpected", message: String::new() },
        ],
        (None, Some(rollout)) => rollout_targets(rollout),
    };
    targets
        .into_iter()
        .map(|target| {
            let status = if target.status { "True" } else { "False" };
            let since = previous
                .iter()
                .find(|c| c.type_ == target.type_ && c.status == status)
                .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
            Condition {
                type_: target.type_.to_owned(),
                status: status.to_owned(),
                reason: target.reason.to_owned(),
                message: target.message,
                observed_generation: generation,
                last_transition_time: since,
            }
        })
        .collect()
}

fn rollout_targets(rollout: &Rollout) -> [Target<'_>; 3] {
    let available = format!("{} of {} replicas available", rollout.available, rollout.desired);
    let ready = if rollout.all_available() {
        Target { type_: READY, status: true, reason: "AllReplicasAvailable", message: available }
    } else {
        Target { type_: READY, status: false, reason: "ReplicasUnavailable", message: available }
    };
    let progressing = match &rollout.failure {
        Some((reason, message)) if reason == "ProgressDeadlineExceeded" => {
            Target { type_: PROGRESSING, status: false, reason, message: message.clone() }
        }
        _ if rollout.in_progress() => Target {
            type_: PROGRESSING,
            status: true,
            reason: "RollingOut",
            message: format!(
                "Deployment {:?} is rolling out: {} of {} replicas updated, {} available",
                rollout.name, rollout.updated, rollout.desired, rollout.available
            ),
        },
        _ => Target {
            type_: PROGRESSING,
            status: false,
            reason: "RolloutComplete",
            message: format!("Deployment {:?} is rolled out", rollout.name),
        },
    };
    let degraded = match &rollout.failure {
        Some((reason, message)) => Target { type_: DEGRADED, status: true, reason, message: message.clone() },
        None => Target { type_: DEGRADED, status: false, reason: "AsExpected", message: String::new() },
    };
    [ready, progressing, degraded]
}

/// The status a Foo should have.
pub fn foo_status(
    foo: &Defaulted<Foo>,
    selector: String,
    deployment: Option<&Deployment>,
    blocker: Option<&Blocker>,
    now: &Time,
) -> FooStatus {
    let previous = foo.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let rollout = deployment.map(|deployment| Rollout::of(deployment, foo.effective().replicas));
    FooStatus {
        available_replicas: rollout.as_ref().map(|r| r.available),
        replicas: rollout.as_ref().map(|r| r.replicas),
        selector: Some(selector),
        observed_generation: foo.metadata.generation,
        conditions: conditions(previous, foo.metadata.generation, blocker, rollout.as_ref(), now),
    }
}

/// The status an Envoy should have; `config_hash` is the bootstrap hash the fleet's pod
/// template carries.
pub fn envoy_status(
    envoy: &Defaulted<Envoy>,
    selector: String,
    deployment: Option<&Deployment>,
    config_hash: Option<String>,
    blocker: Option<&Blocker>,
    now: &Time,
) -> EnvoyStatus {
    let previous = envoy.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let rollout = deployment.map(|deployment| Rollout::of(deployment, envoy.effective().replicas));
    EnvoyStatus {
        replicas: rollout.as_ref().map(|r| r.replicas),
        ready_replicas: rollout.as_ref().map(|r| r.ready),
        available_replicas: rollout.as_ref().map(|r| r.available),
        selector: Some(selector),
        observed_generation: envoy.metadata.generation,
        config_hash,
        conditions: conditions(previous, envoy.metadata.generation, blocker, rollout.as_ref(), now),
        // Added by `fleet::status::with_xds` for fleets the operator serves.
        xds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentSpec, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn deployment(desired: i32, available: i32, updated: i32, generation: i64, observed: i64) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                generation: Some(generation),
                ..Default::default()
            },
            spec: Some(DeploymentSpec { replicas: Some(desired), ..Default::default() }),
            status: Some(DeploymentStatus {
                replicas: Some(updated.max(available)),
                updated_replicas: Some(updated),
                ready_replicas: Some(available),
                available_replicas: Some(available),
                observed_generation: Some(observed),
                ..Default::default()
            }),
        }
    }

    fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
        conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn complete_rollout_is_ready_and_not_progressing() {
        let rollout = Rollout::of(&deployment(3, 3, 3, 2, 2), 3);
        let conditions = conditions(&[], Some(4), None, Some(&rollout), &at(10));
        assert_eq!(find(&conditions, READY).status, "True");
        assert_eq!(find(&conditions, READY).reason, "AllReplicasAvailable");
        assert_eq!(find(&conditions, READY).message, "3 of 3 replicas available");
        assert_eq!(find(&conditions, READY).observed_generation, Some(4));
        assert_eq!(find(&conditions, PROGRESSING).status, "False");
        assert_eq!(find(&conditions, DEGRADED).status, "False");
    }

    #[test]
    fn partial_rollout_is_progressing_and_not_ready() {
        let rollout = Rollout::of(&deployment(3, 1, 2, 2, 2), 3);
        let conditions = conditions(&[], Some(1), None, Some(&rollout), &at(10));
        assert_eq!(find(&conditions, READY).status, "False");
        assert_eq!(find(&conditions, READY).message, "1 of 3 replicas available");
        assert_eq!(find(&conditions, PROGRESSING).status, "True");
        assert_eq!(find(&conditions, PROGRESSING).reason, "RollingOut");
    }

    #[test]
    fn an_unobserved_spec_is_progressing() {
        let rollout = Rollout::of(&deployment(3, 3, 3, 3, 2), 3);
        let conditions = conditions(&[], Some(1), None, Some(&rollout), &at(10));
        assert_eq!(find(&conditions, PROGRESSING).status, "True");
    }

    #[test]
    fn transition_time_changes_only_with_status() {
        let ready = Rollout::of(&deployment(3, 3, 3, 1, 1), 3);
        let first = conditions(&[], Some(1), None, Some(&ready), &at(10));
        // Same observation later: identical conditions.
        assert_eq!(conditions(&first, Some(1), None, Some(&ready), &at(20)), first);
        // Status unchanged but message changed: the time is kept.
        let scaled = Rollout::of(&deployment(4, 4, 4, 1, 1), 4);
        let second = conditions(&first, Some(2), None, Some(&scaled), &at(30));
        assert_eq!(find(&second, READY).last_transition_time, at(10));
        assert_eq!(find(&second, READY).message, "4 of 4 replicas available");
        // Status flips: the time moves.
        let degraded = Rollout::of(&deployment(4, 2, 4, 1, 1), 4);
        let third = conditions(&second, Some(2), None, Some(&degraded), &at(40));
        assert_eq!(find(&third, READY).last_transition_time, at(40));
        assert_eq!(find(&third, DEGRADED).last_transition_time, at(10));
    }

    #[test]
    fn blockers_degrade_with_their_reason() {
        let clash = Blocker::NameClash {
            message: "Resource \"web\" already exists and is not managed by Foo".into(),
        };
        let conditions = conditions(&[], Some(1), Some(&clash), None, &at(10));
        for (type_, status) in [(READY, "False"), (PROGRESSING, "False"), (DEGRADED, "True")] {
            assert_eq!(find(&conditions, type_).status, status, "{type_}");
            assert_eq!(find(&conditions, type_).reason, REASON_RESOURCE_EXISTS);
        }
        assert!(find(&conditions, READY).message.contains("not managed by Foo"));
    }

    #[test]
    fn failed_rollouts_are_degraded() {
        let mut failing = deployment(2, 0, 2, 1, 1);
        failing.status.as_mut().unwrap().conditions = Some(vec![DeploymentCondition {
            type_: "Progressing".into(),
            status: "False".into(),
            reason: Some("ProgressDeadlineExceeded".into()),
            message: Some("ReplicaSet \"web-1\" has timed out progressing.".into()),
            ..Default::default()
        }]);
        let conditions = conditions(&[], Some(1), None, Some(&Rollout::of(&failing, 2)), &at(10));
        assert_eq!(find(&conditions, DEGRADED).status, "True");
        assert_eq!(find(&conditions, DEGRADED).reason, "ProgressDeadlineExceeded");
        assert_eq!(find(&conditions, PROGRESSING).status, "False");
        assert_eq!(find(&conditions, READY).status, "False");
    }

    #[test]
    fn scaled_to_zero_is_ready() {
        let rollout = Rollout::of(&deployment(0, 0, 0, 1, 1), 0);
        let conditions = conditions(&[], Some(1), None, Some(&rollout), &at(10));
        assert_eq!(find(&conditions, READY).status, "True");
        assert_eq!(find(&conditions, PROGRESSING).status, "False");
    }

    #[test]
    fn foo_status_reports_the_deployment() {
        let foo = crate::rules::defaulted(Foo {
            metadata: ObjectMeta { name: Some("f".into()), generation: Some(3), ..Default::default() },
            spec: crate::api::FooSpec { replicas: Some(2), ..Default::default() },
            ..Default::default()
        });
        let status =
            foo_status(&foo, "app=nginx,controller=f".into(), Some(&deployment(2, 1, 2, 1, 1)), None, &at(1));
        assert_eq!(status.available_replicas, Some(1));
        assert_eq!(status.replicas, Some(2));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.selector.as_deref(), Some("app=nginx,controller=f"));
        assert_eq!(status.conditions.len(), 3);
    }
}
