//! The reconcile functions: thin async shells over the pure builders. They read children
//! from the caches, write only what differs (server-side apply, one field manager), and
//! report status.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::{debug, info, warn};

use super::apply::{needs_apply, strip_metadata};
use super::status::{self, Blocker};
use super::{Context, Error, Result, envoy, foo, labels};
use crate::api::{Envoy, Foo};
use crate::rules::Rules;

/// What became of one child.
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

    fn wrote(&self) -> bool {
        matches!(self, Self::Applied(_))
    }
}

/// The parent's identity, checked once per reconcile.
struct Parent<'a> {
    kind: &'static str,
    namespace: String,
    name: String,
    uid: &'a str,
}

impl<'a> Parent<'a> {
    fn of<P: Resource<DynamicType = ()>>(parent: &'a P) -> Result<Self> {
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

/// Makes one child match `desired`. The child comes from the cache; only on a cache miss
/// (a child created moments ago, or one we do not own and so do not watch) is it read from
/// the API. A child controlled by someone else is never touched.
async fn ensure<K>(ctx: &Context, store: &Store<K>, parent: &Parent<'_>, desired: &K) -> Result<Ensured<K>>
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
    let current = match store.get(&ObjectRef::new(&name).within(&parent.namespace)) {
        Some(cached) => Some(cached),
        None => api.get_opt(&name).await.map_err(api_error("get", kind, &name))?.map(|mut fresh| {
            strip_metadata(fresh.meta_mut());
            Arc::new(fresh)
        }),
    };
    let params = match &current {
        Some(current) if !controlled_by(current.as_ref(), parent.uid) => return Ok(Ensured::Clash),
        Some(current) if !needs_apply(desired, current.as_ref()) => {
            return Ok(Ensured::Current(current.clone()));
        }
        // Ours and drifted: take back every field we own, whoever changed it.
        Some(_) => PatchParams::apply(labels::FIELD_MANAGER).force(),
        // New: without force, so if a same-named object appeared since we looked and another
        // manager set any of our fields differently, the API server refuses (409, retried,
        // then seen as a clash) instead of us forcing those fields.
        None => PatchParams::apply(labels::FIELD_MANAGER),
    };
    let mut applied =
        api.patch(&name, &params, &Patch::Apply(desired)).await.map_err(api_error("apply", kind, &name))?;
    ctx.metrics.wrote(kind, "apply");
    info!(parent = parent.kind, namespace = %parent.namespace, name = %parent.name, child = kind, child_name = %name, created = current.is_none(), "applied child");
    strip_metadata(applied.meta_mut());
    Ok(Ensured::Applied(Arc::new(applied)))
}

/// Deletes the children of `kind` this parent controls other than `keep` (left behind by a
/// rename). The uid precondition makes sure a same-named replacement is never deleted.
async fn prune<K>(ctx: &Context, store: &Store<K>, parent: &Parent<'_>, keep: &str) -> Result<Vec<String>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
{
    let kind = kind_of::<K>();
    let stale = store.state_filter(|child| {
        child.meta().namespace.as_deref() == Some(parent.namespace.as_str())
            && controlled_by(child, parent.uid)
            && child.meta().name.as_deref() != Some(keep)
            && child.meta().deletion_timestamp.is_none()
    });
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &parent.namespace);
    let mut deleted = Vec::new();
    for child in stale {
        let name = child.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: child.meta().uid.clone(), resource_version: None }),
            ..DeleteParams::background()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                ctx.metrics.wrote(kind, "delete");
                info!(parent = parent.kind, namespace = %parent.namespace, name = %parent.name, child = kind, child_name = %name, "deleted child left behind by a rename");
                deleted.push(name);
            }
            // Already gone, or replaced by another object of that name: nothing of ours left.
            Err(error) if is_status(&error, 404) || is_status(&error, 409) => {}
            Err(error) => return Err(api_error("delete", kind, &name)(error)),
        }
    }
    Ok(deleted)
}

/// Writes `status` with server-side apply when it differs from what the parent has.
async fn write_status<P, S>(ctx: &Context, who: &Parent<'_>, current: Option<&S>, status: &S) -> Result<bool>
where
    P: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Clone + Debug + DeserializeOwned,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let api: Api<P> = Api::namespaced(ctx.client.clone(), &who.namespace);
    let body = json!({
        "apiVersion": P::api_version(&()),
        "kind": P::kind(&()),
        "status": status,
    });
    let params = PatchParams::apply(labels::FIELD_MANAGER).force();
    match api.patch_status(&who.name, &params, &Patch::Apply(&body)).await {
        Ok(_) => {
            ctx.metrics.wrote(who.kind, "apply_status");
            debug!(kind = who.kind, namespace = %who.namespace, name = %who.name, "status written");
            Ok(true)
        }
        // The parent was deleted meanwhile: nothing left to report on.
        Err(error) if is_status(&error, 404) => Ok(false),
        Err(error) => Err(api_error("apply status of", who.kind, &who.name)(error)),
    }
}

/// Publishes an event about `parent`. Events are best effort: a failure is logged, never
/// fails the reconcile.
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
        let note = blocker.message().to_owned();
        publish(ctx, parent, EventType::Warning, status::REASON_INVALID_SPEC, note, "Validate").await;
    }
    Ok(Action::await_change())
}

async fn publish<P: Resource<DynamicType = ()>>(
    ctx: &Context,
    parent: &P,
    type_: EventType,
    reason: &str,
    note: String,
    action: &str,
) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &parent.object_ref(&())).await {
        warn!(%error, reason, "could not publish event");
    }
}

fn clash_message(name: &str, owner_kind: &str) -> String {
    format!("Resource {name:?} already exists and is not managed by {owner_kind}")
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

/// Runs one reconcile, recording its outcome; a success resets the object's backoff.
async fn observe(
    ctx: &Context,
    kind: &'static str,
    key: &str,
    reconcile: impl std::future::Future<Output = Result<Action>>,
) -> Result<Action> {
    let started = std::time::Instant::now();
    let result = reconcile.await;
    ctx.metrics.reconciled(kind, result.as_ref().err().map(Error::metric_label), started.elapsed());
    if result.is_ok() {
        ctx.backoff.succeeded(key);
    }
    result
}

async fn sync_foo(foo: Arc<Foo>, ctx: Arc<Context>) -> Result<Action> {
    if foo.meta().deletion_timestamp.is_some() {
        // ownerReferences and the garbage collector remove the Deployment.
        return Ok(Action::await_change());
    }
    let parent = Parent::of(foo.as_ref())?;
    ctx.stores.foo_ready().await?;
    let store = &ctx.stores.foo_deployments;
    let mut defaulted = (*foo).clone();
    defaulted.apply_defaults();
    let now = status::now();
    let selector = foo::selector(&foo);
    let current_status = foo.status.as_ref();

    if let Err(errors) = defaulted.validate(None) {
        let blocker = Blocker::InvalidSpec { message: errors.message("Foo", &parent.name) };
        let status = status::foo_status(&foo, selector, None, Some(&blocker), &now);
        return report_invalid_spec(&ctx, &parent, foo.as_ref(), current_status, &status, &blocker).await;
    }

    let desired = foo::desired_deployment(&defaulted, &ctx.settings.nginx_image);
    let deployment_name = desired.name_any();
    let ensured = ensure(&ctx, store, &parent, &desired).await?;
    let Some(deployment) = ensured.object() else {
        let message = clash_message(&deployment_name, "Foo");
        let blocker = Blocker::NameClash { message: message.clone() };
        let status = status::foo_status(&foo, selector, None, Some(&blocker), &now);
        publish(&ctx, foo.as_ref(), EventType::Warning, status::REASON_RESOURCE_EXISTS, message, "Reconcile")
            .await;
        write_status::<Foo, _>(&ctx, &parent, current_status, &status).await?;
        return Err(Error::NameClash {
            kind: "Deployment",
            name: deployment_name,
            owner_kind: "Foo",
            owner: parent.name,
        });
    };

    let pruned = prune(&ctx, store, &parent, &deployment_name).await?;
    for name in &pruned {
        let note = format!("Deleted Deployment {name:?}: spec.deploymentName is now {deployment_name:?}");
        publish(&ctx, foo.as_ref(), EventType::Normal, "DeletedOldDeployment", note, "Delete").await;
    }
    let status = status::foo_status(&foo, selector, Some(deployment), None, &now);
    write_status::<Foo, _>(&ctx, &parent, current_status, &status).await?;
    if ensured.wrote() {
        publish(
            &ctx,
            foo.as_ref(),
            EventType::Normal,
            "Synced",
            "Foo synced successfully".to_owned(),
            "Reconcile",
        )
        .await;
    }
    Ok(Action::requeue(ctx.settings.resync))
}

async fn sync_envoy(envoy: Arc<Envoy>, ctx: Arc<Context>) -> Result<Action> {
    if envoy.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let parent = Parent::of(envoy.as_ref())?;
    ctx.stores.envoy_ready().await?;
    let mut defaulted = (*envoy).clone();
    defaulted.apply_defaults();
    let now = status::now();
    let selector = envoy::selector(&envoy);
    let current_status = envoy.status.as_ref();

    if let Err(errors) = defaulted.validate(None) {
        let blocker = Blocker::InvalidSpec { message: errors.message("Envoy", &parent.name) };
        let status = status::envoy_status(&envoy, selector, None, None, Some(&blocker), &now);
        return report_invalid_spec(&ctx, &parent, envoy.as_ref(), current_status, &status, &blocker).await;
    }

    let children = envoy::desired_children(&defaulted);
    let stores = &ctx.stores;
    // The ConfigMap first: new pods mount it.
    let config_map = ensure(&ctx, &stores.config_maps, &parent, &children.config_map).await?;
    let deployment = match config_map {
        Ensured::Clash => None,
        _ => Some(ensure(&ctx, &stores.envoy_deployments, &parent, &children.deployment).await?),
    };
    let service = match &deployment {
        Some(Ensured::Current(_) | Ensured::Applied(_)) => {
            Some(ensure(&ctx, &stores.services, &parent, &children.service).await?)
        }
        _ => None,
    };
    let clash = match (&config_map, &deployment, &service) {
        (Ensured::Clash, _, _) => Some(("ConfigMap", children.config_map.name_any())),
        (_, Some(Ensured::Clash), _) => Some(("Deployment", children.deployment.name_any())),
        (_, _, Some(Ensured::Clash)) => Some(("Service", children.service.name_any())),
        _ => None,
    };
    let fleet = deployment.as_ref().and_then(Ensured::object).cloned();
    if let Some((kind, name)) = clash {
        let message = format!("{kind} {}", clash_message(&name, "Envoy"));
        let blocker = Blocker::NameClash { message: message.clone() };
        let status = status::envoy_status(&envoy, selector, None, None, Some(&blocker), &now);
        publish(
            &ctx,
            envoy.as_ref(),
            EventType::Warning,
            status::REASON_RESOURCE_EXISTS,
            message,
            "Reconcile",
        )
        .await;
        write_status::<Envoy, _>(&ctx, &parent, current_status, &status).await?;
        return Err(Error::NameClash { kind, name, owner_kind: "Envoy", owner: parent.name });
    }

    let mut pruned = prune(&ctx, &stores.config_maps, &parent, &children.config_map.name_any()).await?;
    pruned.extend(prune(&ctx, &stores.envoy_deployments, &parent, &children.deployment.name_any()).await?);
    pruned.extend(prune(&ctx, &stores.services, &parent, &children.service.name_any()).await?);
    for name in &pruned {
        let note = format!("Deleted {name:?}, which the current spec no longer names");
        publish(&ctx, envoy.as_ref(), EventType::Normal, "DeletedOldChild", note, "Delete").await;
    }

    // The hash the fleet's pod template really carries (the one just applied, or the cached one).
    let applied_hash = fleet.as_deref().and_then(|d| {
        d.spec
            .as_ref()?
            .template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get(labels::CONFIG_HASH_ANNOTATION)
            .cloned()
    });
    let status = status::envoy_status(&envoy, selector, fleet.as_deref(), applied_hash, None, &now);
    write_status::<Envoy, _>(&ctx, &parent, current_status, &status).await?;
    let wrote = config_map.wrote()
        || deployment.as_ref().is_some_and(Ensured::wrote)
        || service.as_ref().is_some_and(Ensured::wrote);
    if wrote {
        publish(
            &ctx,
            envoy.as_ref(),
            EventType::Normal,
            "Synced",
            "Envoy synced successfully".to_owned(),
            "Reconcile",
        )
        .await;
    }
    Ok(Action::requeue(ctx.settings.resync))
}

/// The key of an object in the backoff map.
pub fn backoff_key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!("{}/{}/{}", K::kind(&()), object.namespace().unwrap_or_default(), object.name_any())
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
