//! The reconcile functions: thin async shells over the pure builders and decisions of
//! [`envoy_operator_core::children`]. They read children from the caches, write only what
//! differs (server-side apply, one field manager), and report status and events. Around them,
//! what every controller ([`super::watch`], [`super::routes`]) shares: the feed of parents to
//! reconcile, the error policy with its per-object backoff, the logging of results.
//!
//! One writer per parent when several installs watch its namespace
//! ([`envoy_operator_core::children::install`]): every child applied carries this install's
//! mark, and the mark on the parent's first child (a Foo's Deployment, an Envoy's bootstrap
//! ConfigMap: the child every reconcile applies first; the Envoy's Deployment while that
//! ConfigMap is not created yet) decides which install manages the parent. Deciding on one
//! child means two installs can never each hold part of the children and both stand aside;
//! the managing install re-marks the others as it applies them.

use std::fmt::Debug;
use std::sync::Arc;

use envoy_operator_core::api::{Envoy, Foo};
use envoy_operator_core::children::apply::{needs_apply, strip_metadata};
use envoy_operator_core::children::install::{self, MANAGED_ELSEWHERE};
use envoy_operator_core::children::report::{self, Child, ChildState, Notice, Report};
use envoy_operator_core::children::status::{self, Blocker};
use envoy_operator_core::children::{envoy, foo};
use envoy_operator_core::fleet::status as fleet_status;
use envoy_operator_core::names::{EVENT_REPORTER, FIELD_MANAGER, FLEET_LABEL, STANDBY_FIELD_MANAGER};
use envoy_operator_core::rules::{Defaulted, Rules, defaulted};
use futures::{Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{self, Action};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::{debug, info, warn};

use super::rejections::Gate;
use super::terminating;
use super::{Context, Error, ObjectKey, Result};
use crate::index::{Change, Watched};
use crate::ops::logging::{KubeError, readable};

/// What became of one child, with the object when it is ours.
enum Ensured<K> {
    /// The cluster already held it as desired: nothing was sent.
    Current(Arc<K>),
    /// It was created or corrected; this is the API server's answer.
    Applied(Arc<K>),
    /// Its name is taken by an object this parent does not control: left alone.
    Clash,
}

impl<K> Ensured<K> {
    fn object(&self) -> Option<&Arc<K>> {
        match self {
            Self::Current(object) | Self::Applied(object) => Some(object),
            Self::Clash => None,
        }
    }

    fn state(&self) -> ChildState {
        match self {
            Self::Current(_) => ChildState::Current,
            Self::Applied(_) => ChildState::Applied,
            Self::Clash => ChildState::Clash,
        }
    }
}

/// The report's view of a child that was ensured (`Some`) or not reached (`None`).
fn child<K>(kind: &'static str, name: String, ensured: Option<&Ensured<K>>) -> Child {
    Child { kind, name, state: ensured.map_or(ChildState::NotReached, Ensured::state) }
}

/// The parent's identity, checked once per reconcile.
pub(super) struct Parent<'a> {
    kind: &'static str,
    pub(super) namespace: String,
    name: String,
    uid: &'a str,
}

impl<'a> Parent<'a> {
    pub(super) fn of<P: Resource<DynamicType = ()>>(parent: &'a P) -> Result<Self> {
        let kind = kind_of::<P>();
        let missing = |field| Error::MissingMetadata { kind, field };
        Ok(Self {
            kind,
            namespace: parent.meta().namespace.clone().ok_or_else(|| missing("namespace"))?,
            name: parent.meta().name.clone().ok_or_else(|| missing("name"))?,
            uid: parent.meta().uid.as_deref().ok_or_else(|| missing("uid"))?,
        })
    }
}

fn kind_of<K: Resource<DynamicType = ()>>() -> &'static str {
    match K::kind(&()).as_ref() {
        "Foo" => "Foo",
        "Envoy" => "Envoy",
        "EnvoyRoute" => "EnvoyRoute",
        "Deployment" => "Deployment",
        "ConfigMap" => "ConfigMap",
        "Service" => "Service",
        _ => "object",
    }
}

fn api_error(verb: &'static str, kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_owned();
    move |source| Error::Api { verb, kind, name, source }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// Whether `object`'s controller ownerReference points at `uid`.
fn controlled_by<K: Resource>(object: &K, uid: &str) -> bool {
    object.owner_references().iter().any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

/// The child `name` as the cluster holds it. It comes from the cache; only on a cache miss (a
/// child created moments ago, or one we do not own and so do not watch) is it read from the API.
async fn find<K>(ctx: &Context, store: &Store<K>, parent: &Parent<'_>, name: &str) -> Result<Option<Arc<K>>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    if let Some(cached) = store.get(&ObjectRef::new(name).within(&parent.namespace)) {
        return Ok(Some(cached));
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let fresh = api.get_opt(name).await.map_err(api_error("get", kind_of::<K>(), name))?;
    Ok(fresh.map(|mut fresh| {
        strip_metadata(fresh.meta_mut());
        Arc::new(fresh)
    }))
}

/// The install other than this one that manages `parent`, by the mark on `deciding`, the one
/// child that decides it (see the module documentation), when `parent` controls it.
fn managed_elsewhere<K: Resource>(
    ctx: &Context,
    parent: &Parent<'_>,
    deciding: Option<&K>,
) -> Option<String> {
    deciding
        .filter(|child| controlled_by(*child, parent.uid))
        .and_then(|child| install::other_manager(child.meta(), &ctx.settings.install))
        .map(str::to_owned)
}

/// For a parent whose children cannot be computed (an invalid spec): the install other than
/// this one that marked a cached child it controls, which then reports on it too.
fn marked_elsewhere<K>(ctx: &Context, store: &Store<K>, parent: &Parent<'_>) -> Option<String>
where
    K: Resource<DynamicType = ()> + Clone,
{
    let this = &ctx.settings.install;
    store.state().iter().find_map(|child| {
        let ours = child.meta().namespace.as_deref() == Some(parent.namespace.as_str())
            && controlled_by(child.as_ref(), parent.uid);
        ours.then(|| install::other_manager(child.meta(), this)).flatten().map(str::to_owned)
    })
}

/// Makes one child match `desired` (found in the cluster or not).
async fn ensure<K>(ctx: &Context, store: &Store<K>, parent: &Parent<'_>, desired: &K) -> Result<Ensured<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let current = find(ctx, store, parent, &desired.name_any()).await?;
    ensure_found(ctx, parent, desired, current).await
}

/// Makes one child match `desired`, marked as this install's, given `current`, what the
/// cluster holds of it. A child controlled by someone else is never touched; one this parent
/// controls is made ours, whatever install marked it (the caller decided that this install
/// manages the parent).
async fn ensure_found<K>(
    ctx: &Context,
    parent: &Parent<'_>,
    desired: &K,
    current: Option<Arc<K>>,
) -> Result<Ensured<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let kind = kind_of::<K>();
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let mut desired = desired.clone();
    install::mark(desired.meta_mut(), &ctx.settings.install);
    let desired = &desired;
    let params = match &current {
        Some(current) if !controlled_by(current.as_ref(), parent.uid) => return Ok(Ensured::Clash),
        Some(current) if !needs_apply(desired, current.as_ref()) => {
            return Ok(Ensured::Current(current.clone()));
        }
        // Ours and drifted: take back every field we own, whoever changed it.
        Some(_) => PatchParams::apply(FIELD_MANAGER).force(),
        // New: without force, so if a same-named object appeared since we looked and another
        // manager set any of our fields differently, the API server refuses (409, retried,
        // then seen as a clash) instead of us forcing those fields.
        None => PatchParams::apply(FIELD_MANAGER),
    };
    let mut applied =
        api.patch(&name, &params, &Patch::Apply(desired)).await.map_err(api_error("apply", kind, &name))?;
    ctx.metrics.wrote(kind, "apply");
    info!(parent = parent.kind, namespace = %parent.namespace, name = %parent.name, child = kind, child_name = %name, created = current.is_none(), "applied child");
    strip_metadata(applied.meta_mut());
    Ok(Ensured::Applied(Arc::new(applied)))
}

/// Makes the fleet's Service match `desired`. A Service's cluster IP cannot change, so one of
/// ours holding another than the `spec.serviceClusterIP` asked for is deleted and created
/// again. A cluster IP the API server refuses (outside the cluster's Service range, or held by
/// another Service) is the blocker it answers with, in its words.
async fn ensure_service(
    ctx: &Context,
    parent: &Parent<'_>,
    envoy: &Envoy,
    desired: &Service,
) -> Result<std::result::Result<Ensured<Service>, Blocker>> {
    let name = desired.name_any();
    let wanted = desired.spec.as_ref().and_then(|spec| spec.cluster_ip.as_deref());
    let mut current = find(ctx, &ctx.stores.services, parent, &name).await?;
    let held = current
        .as_deref()
        .filter(|service| controlled_by(*service, parent.uid))
        .and_then(|service| service.spec.as_ref()?.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None");
    // Two spellings of one IPv6 address are one address: no Service is made again for that.
    let same_ip = |held: &str, wanted: &str| match (
        held.parse::<std::net::IpAddr>(),
        wanted.parse::<std::net::IpAddr>(),
    ) {
        (Ok(held), Ok(wanted)) => held == wanted,
        _ => held == wanted,
    };
    if let (Some(wanted), Some(held), Some(service)) = (wanted, held, current.as_deref())
        && !same_ip(&held, wanted)
    {
        let api: Api<Service> = Api::namespaced(ctx.client.clone(), &parent.namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: service.metadata.uid.clone(), resource_version: None }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {}
            Err(error) if is_status(&error, 404) => {}
            Err(error) => return Err(api_error("delete", "Service", &name)(error)),
        }
        ctx.metrics.wrote("Service", "delete");
        info!(namespace = %parent.namespace, name = %parent.name, service = %name, %held, %wanted, "deleted the fleet's Service to recreate it with another cluster IP");
        publish(ctx, envoy, report::service_replaced(&name, &held, wanted)).await;
        current = None;
    }
    match ensure_found(ctx, parent, desired, current).await {
        Err(Error::Api { source: kube::Error::Api(status), .. })
            if wanted.is_some() && status.code == 422 && status.message.contains("clusterIP") =>
        {
            Ok(Err(Blocker::AddressNotUsable { message: status.message }))
        }
        ensured => ensured.map(Ok),
    }
}

/// The children in `store` this parent controls other than `keep`: left behind by a rename.
fn stale<K>(store: &Store<K>, parent: &Parent<'_>, keep: &[String]) -> Vec<Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone,
{
    store.state_filter(|child| {
        child.meta().namespace.as_deref() == Some(parent.namespace.as_str())
            && controlled_by(child, parent.uid)
            && child.meta().name.as_ref().is_none_or(|name| !keep.contains(name))
            && child.meta().deletion_timestamp.is_none()
    })
}

/// Deletes the children of `kind` this parent controls other than `keep` (left behind by a
/// rename; the first of `keep` is the one the spec names now). The uid precondition makes sure
/// a same-named replacement is never deleted.
async fn prune<K>(
    ctx: &Context,
    store: &Store<K>,
    parent: &Parent<'_>,
    keep: &[String],
) -> Result<Vec<Notice>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let kind = kind_of::<K>();
    let stale = stale(store, parent, keep);
    let current = keep.first().map_or("", String::as_str);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let mut deleted = Vec::new();
    for child in stale {
        let name = child.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: child.meta().uid.clone(), resource_version: None }),
            ..DeleteParams::background()
        };
        let deleted_now = api.delete(&name, &params).await;
        ctx.metrics.wrote(kind, "delete");
        match deleted_now {
            Ok(_) => {
                info!(parent = parent.kind, namespace = %parent.namespace, name = %parent.name, child = kind, child_name = %name, "deleted child left behind by a rename");
                deleted.push(report::pruned(parent.kind, kind, &name, current));
            }
            // Already gone, or replaced by another object of that name: nothing of ours left.
            Err(error) if is_status(&error, 404) || is_status(&error, 409) => {}
            Err(error) => return Err(api_error("delete", kind, &name)(error)),
        }
    }
    Ok(deleted)
}

/// Pods per page when looking for the mounts of stale ConfigMaps.
const POD_PAGE: u32 = 100;

/// The Envoy's ConfigMaps that its spec no longer names (`keep` are those it does) but that
/// pods of the fleet still mount: the fleet's old pods during a roll, and sidecars injected
/// before the CA file had a ConfigMap of its own, which mount the bootstrap ConfigMap of their
/// day. Deleting one would strand them (`FailedMount` on restart, and no new CA), so they are
/// kept, given the current CA file `ca_file`, until no running pod mounts them; a later
/// reconcile (at the latest the periodic resync) deletes them. The pods are listed only when
/// there is such a ConfigMap (after a rename).
async fn keep_mounted(
    ctx: &Context,
    parent: &Parent<'_>,
    keep: &[String],
    ca_file: Option<&str>,
) -> Result<Vec<String>> {
    let stale = stale(&ctx.stores.config_maps, parent, keep);
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let mut params = ListParams::default().labels(&format!("{FLEET_LABEL}={}", parent.name)).limit(POD_PAGE);
    let mut mounted = std::collections::BTreeSet::new();
    loop {
        let page = pods.list(&params).await.map_err(api_error("list", "Pod", &parent.name))?;
        // A pod on its way out, or done, never mounts anything again.
        let alive = |pod: &&Pod| {
            let phase = pod.status.as_ref().and_then(|status| status.phase.as_deref());
            pod.metadata.deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
        };
        let volumes =
            page.items.iter().filter(alive).filter_map(|pod| pod.spec.as_ref()?.volumes.as_ref()).flatten();
        mounted.extend(volumes.filter_map(|volume| Some(volume.config_map.as_ref()?.name.clone())));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let mut kept = Vec::new();
    for config_map in stale {
        let name = config_map.name_any();
        if !mounted.contains(&name) {
            continue;
        }
        let held = config_map.data.as_ref().and_then(|data| data.get(envoy::CA_SDS_KEY)).map(String::as_str);
        if let Some(ca_file) = ca_file.filter(|file| held != Some(*file)) {
            // Only the CA file: the rest stays as the pods that mount it knew it.
            let patch = json!({"data": {envoy::CA_SDS_KEY: ca_file}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(api_error(
                "patch",
                "ConfigMap",
                &name,
            ))?;
            ctx.metrics.wrote("ConfigMap", "patch");
        }
        info!(namespace = %parent.namespace, name = %parent.name, config_map = %name, "kept a ConfigMap the spec no longer names: pods still mount it");
        kept.push(name);
    }
    Ok(kept)
}

/// Writes `status` with server-side apply when it differs from what the parent has.
pub(super) async fn write_status<P, S>(
    ctx: &Context,
    who: &Parent<'_>,
    current: Option<&S>,
    status: &S,
) -> Result<bool>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    S: Serialize + PartialEq,
{
    if current.is_some_and(|current| same_status(current, status)) {
        return Ok(false);
    }
    let api: Api<P> = Api::namespaced(ctx.client.clone(), &who.namespace);
    let body = json!({
        "apiVersion": P::api_version(&()),
        "kind": P::kind(&()),
        "status": status,
    });
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = api.patch_status(&who.name, &params, &Patch::Apply(&body)).await;
    ctx.metrics.wrote(who.kind, "apply_status");
    match written {
        Ok(_) => {
            debug!(kind = who.kind, namespace = %who.namespace, name = %who.name, "status written");
            Ok(true)
        }
        // The parent was deleted meanwhile: nothing left to report on.
        Err(error) if is_status(&error, 404) => Ok(false),
        Err(error) => Err(api_error("apply status of", who.kind, &who.name)(error)),
    }
}

/// Whether the parent's `current` status already says `desired`, leaving out the
/// `ManagedElsewhere` condition: another install's entry, which an apply of `desired` keeps.
fn same_status<S: Serialize + PartialEq>(current: &S, desired: &S) -> bool {
    match (serde_json::to_value(current), serde_json::to_value(desired)) {
        (Ok(current), Ok(desired)) => install::without_standby(current) == desired,
        _ => current == desired,
    }
}

/// Applies `condition` (`ManagedElsewhere`) to the parent's status under the field manager every
/// install shares for it, and nothing else: the managing install's status applies neither own
/// nor remove that entry of the `conditions` map. Returns whether it was written.
async fn write_standby<P>(ctx: &Context, who: &Parent<'_>, condition: &Condition) -> Result<bool>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let api: Api<P> = Api::namespaced(ctx.client.clone(), &who.namespace);
    let body = json!({
        "apiVersion": P::api_version(&()),
        "kind": P::kind(&()),
        "status": {"conditions": [condition]},
    });
    let params = PatchParams::apply(STANDBY_FIELD_MANAGER).force();
    let written = api.patch_status(&who.name, &params, &Patch::Apply(&body)).await;
    ctx.metrics.wrote(who.kind, "apply_status");
    match written {
        Ok(_) => Ok(true),
        Err(error) if is_status(&error, 404) => Ok(false),
        Err(error) => Err(api_error("apply status of", who.kind, &who.name)(error)),
    }
}

/// This install leaves `parent` to the install `manager`, whose mark its first child carries:
/// it writes none of the children and nothing of the status but the `ManagedElsewhere`
/// condition naming `manager` (`conditions` are the parent's), with a Warning event when that
/// is news. Nothing is written once the condition says so, and no error: waiting is the
/// steady state of an install standing aside (a change of mark reconciles the parent again).
async fn stand_aside<P>(
    ctx: &Context,
    who: &Parent<'_>,
    parent: &P,
    conditions: &[Condition],
    manager: &str,
) -> Result<Action>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let this = &ctx.settings.install;
    debug!(kind = who.kind, namespace = %who.namespace, name = %who.name, %manager, "managed by another install: standing aside");
    let generation = parent.meta().generation;
    let Some(condition) = install::standby_condition(conditions, generation, this, manager, &status::now())
    else {
        return Ok(Action::requeue(ctx.settings.resync));
    };
    let news = !conditions.iter().any(|known| {
        known.type_ == MANAGED_ELSEWHERE
            && known.status == condition.status
            && known.message == condition.message
    });
    if write_standby::<P>(ctx, who, &condition).await? && news {
        warn!(kind = who.kind, namespace = %who.namespace, name = %who.name, %manager, "another operator install manages this parent's children: leaving them alone");
        let note = install::standing_aside_note(who.kind, this, manager);
        let notice =
            Notice { warning: true, reason: install::EVENT_MANAGED_ELSEWHERE, note, action: "Reconcile" };
        publish(ctx, parent, notice).await;
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// The managing install corrects a `ManagedElsewhere` condition naming another install (left by
/// an install that managed the parent before, or by this one while it stood aside).
async fn correct_standby<P>(
    ctx: &Context,
    who: &Parent<'_>,
    parent: &P,
    conditions: &[Condition],
) -> Result<()>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let this = &ctx.settings.install;
    let generation = parent.meta().generation;
    if let Some(condition) =
        install::standby_condition(conditions, generation, this, this.as_str(), &status::now())
    {
        write_standby::<P>(ctx, who, &condition).await?;
    }
    Ok(())
}

/// A parent whose spec the rules reject gets no children: its status says why, with a
/// Warning event when that status is new. Only a new spec can fix it, so no requeue.
async fn report_invalid_spec<P, S>(
    ctx: &Context,
    who: &Parent<'_>,
    parent: &P,
    current: Option<&S>,
    status: &S,
    blocker: &Blocker,
) -> Result<Action>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    S: Serialize + PartialEq,
{
    if write_status::<P, S>(ctx, who, current, status).await? {
        publish(ctx, parent, report::invalid_spec(blocker)).await;
    }
    Ok(Action::await_change())
}

/// Publishes an event about `parent`. Events are best effort: a failure is logged, never
/// fails the reconcile.
async fn publish<P: Resource<DynamicType = ()>>(ctx: &Context, parent: &P, notice: Notice) {
    publish_with(ctx, &ctx.recorder, parent, notice).await;
}

/// [`publish`] through `recorder`.
async fn publish_with<P: Resource<DynamicType = ()>>(
    ctx: &Context,
    recorder: &Recorder,
    parent: &P,
    notice: Notice,
) {
    let event = Event {
        type_: if notice.warning { EventType::Warning } else { EventType::Normal },
        reason: notice.reason.to_owned(),
        note: Some(notice.note),
        action: notice.action.to_owned(),
        secondary: None,
    };
    let published = recorder.publish(&event, &parent.object_ref(&())).await;
    ctx.metrics.wrote("Event", "publish");
    match published {
        Ok(()) => {}
        // Its namespace is being deleted, and the parent with it.
        Err(error) if terminating::refused_as_terminating(&error) => {
            debug!(reason = notice.reason, "no event: the namespace is being deleted");
        }
        Err(error) => warn!(error = %KubeError(&error), reason = notice.reason, "could not publish event"),
    }
}

/// Reconciles one Foo: its Deployment, then its status.
pub async fn reconcile_foo(foo: Arc<Foo>, ctx: Arc<Context>) -> Result<Action> {
    let key = backoff_key(foo.as_ref());
    observe(&ctx, "Foo", &key, sync_foo(foo, ctx.clone())).await
}

/// Reconciles one Envoy: bootstrap ConfigMap, Deployment, Service, then its status.
pub async fn reconcile_envoy(envoy: Arc<Envoy>, ctx: Arc<Context>) -> Result<Action> {
    let key = backoff_key(envoy.as_ref());
    observe(&ctx, "Envoy", &key, sync_envoy(envoy, ctx.clone())).await
}

/// Runs one reconcile, recording its outcome; a success resets the object's backoff. A
/// reconcile the API server refused because the object's namespace is being deleted is no
/// failure: the object waits for its deletion ([`super::terminating`]).
pub(super) async fn observe(
    ctx: &Context,
    kind: &'static str,
    key: &ObjectKey,
    reconcile: impl std::future::Future<Output = Result<Action>>,
) -> Result<Action> {
    let started = std::time::Instant::now();
    let result = match reconcile.await {
        Err(error) if terminating::is_namespace_terminating(&error) => {
            let namespace = key.namespace.as_deref().unwrap_or_default();
            if ctx.terminating.first_time(namespace, std::time::Instant::now()) {
                info!(
                    namespace,
                    "the namespace is being deleted: the operator no longer creates anything in it"
                );
            }
            debug!(kind, object = %key, error = %error, "not reconciled: its namespace is being deleted");
            Ok(Action::await_change())
        }
        result => result,
    };
    ctx.metrics.reconciled(kind, result.as_ref().err().map(Error::metric_label), started.elapsed());
    if result.is_ok() {
        ctx.backoff.forget(key);
    }
    result
}

/// The parent with its defaults, as every builder takes it (the cached object is never
/// changed: kube-runtime shares it).
fn with_defaults<K: Rules + Clone>(parent: &K) -> Defaulted<K> {
    defaulted(parent.clone())
}

async fn sync_foo(foo: Arc<Foo>, ctx: Arc<Context>) -> Result<Action> {
    if foo.meta().deletion_timestamp.is_some() {
        // ownerReferences and the garbage collector remove the Deployment.
        return Ok(Action::await_change());
    }
    let parent = Parent::of(foo.as_ref())?;
    ctx.stores.listed().await?;
    let store = &ctx.stores.deployments;
    let defaulted = with_defaults(foo.as_ref());
    let now = status::now();
    let selector = foo::selector(&foo);
    let current_status = foo.status.as_ref();

    if let Err(errors) = defaulted.validate(None) {
        let conditions = current_status.map(|status| status.conditions.as_slice()).unwrap_or_default();
        if let Some(manager) = marked_elsewhere(&ctx, store, &parent) {
            return stand_aside(&ctx, &parent, foo.as_ref(), conditions, &manager).await;
        }
        let blocker = Blocker::InvalidSpec { message: errors.message("Foo", &parent.name) };
        let status = status::foo_status(&defaulted, selector, None, Some(&blocker), &now);
        return report_invalid_spec(&ctx, &parent, foo.as_ref(), current_status, &status, &blocker).await;
    }

    let desired = foo::desired_deployment(&defaulted, &ctx.settings.nginx_image);
    let deployment_name = desired.name_any();
    let conditions = current_status.map(|status| status.conditions.as_slice()).unwrap_or_default();
    let found = find(&ctx, store, &parent, &deployment_name).await?;
    if let Some(manager) = managed_elsewhere(&ctx, &parent, found.as_deref()) {
        return stand_aside(&ctx, &parent, foo.as_ref(), conditions, &manager).await;
    }
    let ensured = ensure_found(&ctx, &parent, &desired, found).await?;
    let notice = match report::report("Foo", &[child("Deployment", deployment_name.clone(), Some(&ensured))])
    {
        Report::Clash { kind, name, blocker, notice } => {
            let status = status::foo_status(&defaulted, selector, None, Some(&blocker), &now);
            publish(&ctx, foo.as_ref(), notice).await;
            write_status::<Foo, _>(&ctx, &parent, current_status, &status).await?;
            return Err(Error::NameClash { kind, name, owner_kind: "Foo", owner: parent.name });
        }
        Report::InPlace { notice } => notice,
    };

    for pruned in prune(&ctx, store, &parent, std::slice::from_ref(&deployment_name)).await? {
        publish(&ctx, foo.as_ref(), pruned).await;
    }
    let status = status::foo_status(&defaulted, selector, ensured.object().map(AsRef::as_ref), None, &now);
    write_status::<Foo, _>(&ctx, &parent, current_status, &status).await?;
    correct_standby(&ctx, &parent, foo.as_ref(), conditions).await?;
    if let Some(notice) = notice {
        publish(&ctx, foo.as_ref(), notice).await;
    }
    Ok(Action::requeue(ctx.settings.resync))
}

async fn sync_envoy(envoy: Arc<Envoy>, ctx: Arc<Context>) -> Result<Action> {
    if envoy.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let parent = Parent::of(envoy.as_ref())?;
    ctx.stores.listed().await?;
    let defaulted = with_defaults(envoy.as_ref());
    let now = status::now();
    let selector = envoy::selector(&envoy);
    let current_status = envoy.status.as_ref();

    // What the xDS replicas report, for a fleet the operator serves.
    let fleet = match (&ctx.fleet_reports, &defaulted.spec.xds) {
        (Some(reports), None) => {
            reports.ready().await?;
            Some(reports.observe(&parent.namespace, &parent.name))
        }
        _ => None,
    };
    let previous = current_status.map(|status| status.conditions.as_slice()).unwrap_or_default();
    let with_xds = |status| fleet_status::with_xds(status, previous, fleet.as_ref(), &now);

    if let Err(errors) = defaulted.validate(None) {
        let stores = &ctx.stores;
        let manager = marked_elsewhere(&ctx, &stores.config_maps, &parent)
            .or_else(|| marked_elsewhere(&ctx, &stores.deployments, &parent))
            .or_else(|| marked_elsewhere(&ctx, &stores.services, &parent));
        if let Some(manager) = manager {
            return stand_aside(&ctx, &parent, envoy.as_ref(), previous, &manager).await;
        }
        let blocker = Blocker::InvalidSpec { message: errors.message("Envoy", &parent.name) };
        let status = with_xds(status::envoy_status(&defaulted, selector, None, None, Some(&blocker), &now));
        return report_invalid_spec(&ctx, &parent, envoy.as_ref(), current_status, &status, &blocker).await;
    }

    let trust = ctx.control_plane.as_ref().map(|trust| trust.borrow().clone());
    let mut children = envoy::desired_children(&defaulted, trust.as_ref());
    let mut renewal = None;
    let stores = &ctx.stores;
    // The ConfigMaps first: new pods mount them. Each next child only when the one before is ours.
    let found = find(&ctx, &stores.config_maps, &parent, &children.config_map.name_any()).await?;
    let manager = match &found {
        Some(config_map) => managed_elsewhere(&ctx, &parent, Some(config_map.as_ref())),
        // A bootstrap ConfigMap not created yet (a new Envoy, a rename): the Deployment decides,
        // so the install that manages the fleet now keeps it.
        None => {
            let deployment = ObjectRef::new(&children.deployment.name_any()).within(&parent.namespace);
            managed_elsewhere(&ctx, &parent, stores.deployments.get(&deployment).as_deref())
        }
    };
    if let Some(manager) = manager {
        return stand_aside(&ctx, &parent, envoy.as_ref(), previous, &manager).await;
    }
    let config_map = ensure_found(&ctx, &parent, &children.config_map, found).await?;
    let ca_config_map = match (&config_map, &children.ca_config_map) {
        (Ensured::Clash, _) | (_, None) => None,
        (_, Some(ca)) => Some(ensure(&ctx, &stores.config_maps, &parent, ca).await?),
    };
    let deployment = match (&config_map, &ca_config_map) {
        (Ensured::Clash, _) | (_, Some(Ensured::Clash)) => None,
        _ => {
            // The identity Secret before the Deployment whose pods mount it; none for a
            // Deployment of that name that is someone else's (it is left alone, below).
            let cached = ObjectRef::new(&children.deployment.name_any()).within(&parent.namespace);
            let ours = stores.deployments.get(&cached).is_none_or(|d| controlled_by(d.as_ref(), parent.uid));
            let served = children.identity_secret.is_some() && ours;
            renewal = super::identity::attach(&ctx, envoy.as_ref(), served, &mut children.deployment).await?;
            Some(ensure(&ctx, &stores.deployments, &parent, &children.deployment).await?)
        }
    };
    let service = match &deployment {
        Some(Ensured::Current(_) | Ensured::Applied(_)) => {
            match ensure_service(&ctx, &parent, envoy.as_ref(), &children.service).await? {
                Ok(ensured) => Some(ensured),
                Err(blocker) => {
                    let status = with_xds(status::envoy_status(
                        &defaulted,
                        selector,
                        None,
                        None,
                        Some(&blocker),
                        &now,
                    ));
                    publish(&ctx, envoy.as_ref(), report::address_not_usable(&blocker)).await;
                    write_status::<Envoy, _>(&ctx, &parent, current_status, &status).await?;
                    let (name, message) = (children.service.name_any(), blocker.message().to_owned());
                    return Err(Error::AddressNotUsable { name, message });
                }
            }
        }
        _ => None,
    };
    let mut states = vec![child("ConfigMap", children.config_map.name_any(), Some(&config_map))];
    if let Some(ca) = &children.ca_config_map {
        states.push(child("ConfigMap", ca.name_any(), ca_config_map.as_ref()));
    }
    states.extend([
        child("Deployment", children.deployment.name_any(), deployment.as_ref()),
        child("Service", children.service.name_any(), service.as_ref()),
    ]);
    let notice = match report::report("Envoy", &states) {
        Report::Clash { kind, name, blocker, notice } => {
            let status =
                with_xds(status::envoy_status(&defaulted, selector, None, None, Some(&blocker), &now));
            publish(&ctx, envoy.as_ref(), notice).await;
            write_status::<Envoy, _>(&ctx, &parent, current_status, &status).await?;
            return Err(Error::NameClash { kind, name, owner_kind: "Envoy", owner: parent.name });
        }
        Report::InPlace { notice } => notice,
    };

    let mut config_maps = vec![children.config_map.name_any()];
    config_maps.extend(children.ca_config_map.as_ref().map(ResourceExt::name_any));
    let ca_file = children.config_map.data.as_ref().and_then(|data| data.get(envoy::CA_SDS_KEY));
    config_maps.extend(keep_mounted(&ctx, &parent, &config_maps, ca_file.map(String::as_str)).await?);
    let mut pruned = prune(&ctx, &stores.config_maps, &parent, &config_maps).await?;
    pruned.extend(prune(&ctx, &stores.deployments, &parent, &[children.deployment.name_any()]).await?);
    pruned.extend(prune(&ctx, &stores.services, &parent, &[children.service.name_any()]).await?);
    for notice in pruned {
        publish(&ctx, envoy.as_ref(), notice).await;
    }

    // The hash the fleet's pod template really carries (the one just applied, or the cached one).
    let rollout = deployment.as_ref().and_then(Ensured::object);
    let applied_hash = rollout.and_then(|deployment| envoy::config_hash_of(deployment));
    let status = with_xds(status::envoy_status(
        &defaulted,
        selector,
        rollout.map(AsRef::as_ref),
        applied_hash,
        None,
        &now,
    ));
    write_status::<Envoy, _>(&ctx, &parent, current_status, &status).await?;
    correct_standby(&ctx, &parent, envoy.as_ref(), previous).await?;
    if let Some(notice) = notice {
        publish(&ctx, envoy.as_ref(), notice).await;
    }
    let held = announce_rejections(&ctx, envoy.as_ref(), fleet.as_ref()).await;
    // Back when a held-back rejection is to be told, or the fleet's identity is to be renewed.
    let next = [held, renewal].into_iter().flatten().fold(ctx.settings.resync, std::time::Duration::min);
    Ok(Action::requeue(next))
}

/// A Warning `ConfigRejected` event on the Envoy when the rejections its proxies live with
/// change ([`super::rejections`]); the wait when one is held back, to be told then.
async fn announce_rejections(
    ctx: &Context,
    envoy: &Envoy,
    fleet: Option<&fleet_status::FleetObservation>,
) -> Option<std::time::Duration> {
    let rejected = fleet.and_then(|fleet| fleet.rejected.as_ref());
    let gate = ctx.rejection_events.check(
        &backoff_key(envoy),
        rejected.map(|rejected| rejected.key.as_str()),
        std::time::Instant::now(),
    );
    match (gate, rejected) {
        (Gate::Tell, Some(rejected)) => {
            let notice = Notice {
                warning: true,
                reason: fleet_status::EVENT_CONFIG_REJECTED,
                note: rejected.note.clone(),
                action: "Configure",
            };
            // A recorder of its own: the shared one folds an event of the same reason into the
            // last one's series for minutes, keeping that one's note, and each rejection told
            // here is news with its own (they are rate-limited above instead).
            let recorder = Recorder::new(ctx.client.clone(), EVENT_REPORTER.into());
            publish_with(ctx, &recorder, envoy, notice).await;
            None
        }
        (Gate::Hold(wait), _) => Some(wait),
        _ => None,
    }
}

/// The key of an object in the backoff map.
pub fn backoff_key<K: Resource<DynamicType = ()>>(object: &K) -> ObjectKey {
    ObjectRef::from_obj(object).erase()
}

/// What to do after a failed reconcile: retry with per-object exponential backoff.
pub fn error_policy<K: Resource<DynamicType = ()>>(
    object: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let key = backoff_key(object.as_ref());
    let delay = ctx.backoff.failed(&key);
    warn!(%error, error_kind = error.metric_label(), object = %key, retry_in_s = delay.as_secs(), "reconcile failed");
    Action::requeue(delay)
}

/// A parent kind's objects to reconcile (applied ones; on a relisting, all), dropping a deleted
/// parent's backoff record (and an Envoy's record of rejection events) on the way, so the
/// records never outlive the object.
pub(super) fn parents<K>(kind: &Watched<K>, ctx: Arc<Context>) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let store = kind.store().clone();
    kind.changes().flat_map(move |change| {
        let objects = match change {
            Change::Applied(object) => vec![object],
            Change::Deleted(object) => {
                ctx.backoff.forget(&backoff_key(object.as_ref()));
                ctx.rejection_events.forget(&backoff_key(object.as_ref()));
                Vec::new()
            }
            Change::Relisted => store.state(),
        };
        futures::stream::iter(objects)
    })
}

pub(super) fn log_result<K: Resource, E: std::error::Error, Q: std::error::Error>(
    kind: &'static str,
    result: Result<(reflector::ObjectRef<K>, controller::Action), controller::Error<E, Q>>,
) {
    match result {
        Ok((object, _)) => debug!(kind, object = %object, "reconciled"),
        // Failed reconciles are logged by the error policy, with their backoff.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::QueueError(error)) => {
            warn!(kind, error = %readable(&error), "watch failed; retrying with backoff")
        }
        Err(error) => debug!(kind, error = %readable(&error), "controller event"),
    }
}
