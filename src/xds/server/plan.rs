//! What one stream's proxy has, what it asked for, and what to send it next, in an order that
//! never leaves traffic without a destination. Both protocol variants share it; they differ in
//! how requests change it (`sotw.rs`, `delta.rs`) and how a [`Push`] becomes a response.
//!
//! # Ordering
//!
//! Each stream moves its proxy toward the newest snapshot (the target) in three phases, each
//! started only once the previous one is settled (every response of its types ACKed):
//!
//! 1. **Upstream additions**: new and changed secrets, clusters and endpoints (CDS before EDS).
//!    Nothing is removed. Settled also requires that every EDS cluster the proxy has holds the
//!    target's endpoints, so a new cluster is warm before any route can point at it.
//! 2. **Downstream**: listeners (additions, changes and removals in one response, so Envoy can
//!    replace a listener by another on the same address) then route configurations. Settled also
//!    requires every listener's route configurations and certificates (secrets, which Envoy
//!    requests once it has the listener, and which are pushed as upstream additions) to be
//!    delivered, so a replacing listener is warm (and the one it replaces gone) before phase 3.
//! 3. **Upstream removals**: clusters the target no longer has, now that no route uses them.
//!
//! In state-of-the-world a CDS response is the full set, so during phases 1 and 2 the set is
//! the target's clusters *plus* the clusters the proxy still has; phase 3 sends the target's.
//!
//! Types requested by name (RDS, EDS) are never removed by the server: Envoy unsubscribes from
//! them when the listener or cluster using them goes, and until then they are in use.
//!
//! # NACKs
//!
//! A NACK marks the response's resources rejected: they are not sent again for the same target,
//! no later phase starts and, for a wildcard type, nothing of it is removed (so a rejected
//! listener never costs the proxy the one it was meant to replace). Which of them the proxy
//! applied anyway is unknown (Envoy applies the valid clusters and listeners of a rejected
//! response), so the next target sends all of them again, or removes those it no longer has.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

// The fuzz crate reaches it through a `#[doc(hidden)]` re-export in `xds_server` (mod.rs);
// without that re-export only the tests use it.
#[doc(hidden)]
pub mod fuzzing;
mod held;

use self::held::{HeldRef, HeldSet};
use super::byte_budget::{ByteBudget, Charge};
use super::cache::Published;
use super::resource::{Reference, Resource, Stage, push_rank, stage, type_url};
use super::snapshot::Snapshot;
use super::tracker::Protocol;

// Limits on what a client can make a stream hold, checked before a request changes anything.
// The names a stream subscribes to (and the versions a reconnecting delta proxy reports) are
// the client's, so they are charged against a per-stream byte budget (and the service's,
// `SubscriptionBudget`, shared by all its streams): their length plus
// `ENTRY_OVERHEAD_BYTES` each, an estimate of the set and map entries (and the `Arc` header)
// that hold them. Each type a stream requests is charged too (`type_state_bytes`), so what a
// client makes a stream hold is in these budgets, not in each connection's. Everything else a
// stream holds is the server's (resources of the snapshot, shared with every stream) or
// bounded by those names.

/// Resource types one stream may request.
pub(crate) const MAX_TYPES: usize = 32;
/// Bytes of a type URL (Envoy's are under 80).
pub(crate) const MAX_TYPE_URL_BYTES: usize = 256;
/// What one type of a stream takes beside its subscribed names and its type URL, charged to
/// the stream's budget (and the service's) when the type is first requested: its boxed
/// [`TypeState`], its entry in the stream's map (nodes half full at worst), its type URL's
/// allocation header and its nonces. Checked against the types' sizes by a test.
pub(crate) const TYPE_STATE_BYTES: usize = 576;

/// What a type of `type_url` takes beside its subscribed names: [`TYPE_STATE_BYTES`] and the
/// URL (at most [`MAX_TYPE_URL_BYTES`]; Envoy's are 50 to 65 bytes), as long as it is rather
/// than as long as it could be.
pub(crate) fn type_state_bytes(type_url: &str) -> usize {
    TYPE_STATE_BYTES + type_url.len()
}

/// Bytes of a resource name, or of a version a reconnecting proxy reports. The operator's
/// names are at most 133 bytes (`namespace/service/port`), its versions 16.
pub(crate) const MAX_NAME_BYTES: usize = 1024;
/// What one name (or reported version) costs beyond its bytes.
pub(crate) const ENTRY_OVERHEAD_BYTES: usize = 128;
/// A stream's subscriptions, over all its types: at most 32,768 names. A delta proxy of 4,000
/// clusters (about as many as one request can name) reconnecting (reporting its clusters' and
/// endpoints' versions, then subscribing to the endpoints) takes about 2 MiB.
pub(crate) const MAX_SUBSCRIBED_BYTES: usize = 4 * 1024 * 1024;

/// A request that cannot be honoured.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum PlanError {
    #[error("more than {MAX_TYPES} resource types on one stream")]
    TooManyTypes,

    #[error("a type URL of {length} bytes, over the limit of {MAX_TYPE_URL_BYTES}")]
    TypeUrlTooLong { length: usize },

    #[error(
        "a resource name or version of {length} bytes in a request of type {type_url}, over the limit of {MAX_NAME_BYTES}"
    )]
    NameTooLong { type_url: String, length: usize },

    #[error(
        "the stream's subscriptions would take {needed} bytes, over the limit of {MAX_SUBSCRIBED_BYTES} \
         (each resource name or reported version counts its length plus {ENTRY_OVERHEAD_BYTES})"
    )]
    TooManySubscribedBytes { needed: usize },

    #[error(
        "the stream's subscriptions would take the server's streams over the {limit} bytes they may hold together: try later"
    )]
    ServerSubscriptionsFull { limit: usize },
}

/// The subscription bytes all the streams of a service may hold together; each stream holds a
/// [`Share`] of it.
pub(crate) type SubscriptionBudget = ByteBudget;

/// What one stream's subscriptions take of the [`SubscriptionBudget`], given back when the
/// stream's state is dropped.
#[derive(Debug)]
pub(crate) struct Share(Charge);

impl From<Charge> for Share {
    fn from(charge: Charge) -> Self {
        Self(charge)
    }
}

impl Share {
    pub fn bytes(&self) -> usize {
        self.0.bytes()
    }

    /// Grows (or shrinks) the share to `bytes`, if the stream's own cap and what the other
    /// streams hold allow; unchanged if not.
    fn reserve(&mut self, bytes: usize) -> Result<(), PlanError> {
        if bytes > MAX_SUBSCRIBED_BYTES {
            return Err(PlanError::TooManySubscribedBytes { needed: bytes });
        }
        match self.0.resize(bytes) {
            true => Ok(()),
            false => Err(PlanError::ServerSubscriptionsFull { limit: self.0.limit() }),
        }
    }

    /// Gives back what a reservation took beyond what the request turned out to need.
    fn shrink_to(&mut self, bytes: usize) {
        if bytes < self.0.bytes() {
            self.0.resize(bytes);
        }
    }
}

/// The protocol wants a newly requested resource sent again even if the proxy got it before
/// (e.g. through the wildcard); not one it just reported having on reconnecting.
fn forget_for_resend(held: &mut HeldSet, name: &str) {
    if held.get(name).is_none_or(|held| held.reported().is_none()) {
        held.remove(name);
    }
}

/// What subscribing to `name` costs the stream's budget.
fn name_cost(name: &str) -> usize {
    name.len() + ENTRY_OVERHEAD_BYTES
}

/// A resource the proxy has, as far as this stream knows.
#[derive(Clone, Debug)]
enum Held {
    /// Sent on this stream.
    Sent(Arc<Resource>),
    /// Reported by the proxy on reconnecting (delta `initial_resource_versions`): only the
    /// version is known.
    Reported(Arc<str>),
    /// Part of a NACKed response. Envoy may have applied some of its resources anyway (CDS
    /// and LDS apply the valid ones), so the proxy may have the resource it had before (kept,
    /// for state-of-the-world full sets) or the new one: it matches no version, so the next
    /// target sends it (or removes it) again.
    Uncertain(Option<Arc<Resource>>),
}

impl Held {
    /// The version the proxy has; empty (matching no resource) when uncertain.
    fn version(&self) -> &str {
        match self {
            Held::Sent(resource) => resource.version(),
            Held::Reported(version) => version,
            Held::Uncertain(_) => "",
        }
    }

    fn resource(&self) -> Option<&Arc<Resource>> {
        match self {
            Held::Sent(resource) | Held::Uncertain(Some(resource)) => Some(resource),
            Held::Reported(_) | Held::Uncertain(None) => None,
        }
    }
}

/// One name's change in a response, to undo it on a NACK.
#[derive(Debug)]
struct Change {
    name: Arc<str>,
    before: Option<Held>,
    after: Option<Arc<Resource>>,
}

/// A response waiting for its ACK or NACK.
#[derive(Debug)]
struct InFlight {
    nonce: String,
    version: Arc<str>,
    since: Instant,
    changes: Vec<Change>,
}

/// How a response was answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    Acked {
        version: Arc<str>,
        since: Instant,
    },
    Nacked {
        version: Arc<str>,
    },
    /// Answers a response this stream did not send or that a later one superseded.
    Unknown,
}

/// What to send for one type: the changed resources and the names to remove (delta), or the
/// whole set the proxy should have (state of the world), with the nonce already recorded.
#[derive(Debug)]
pub(crate) struct Push {
    pub type_url: Arc<str>,
    pub nonce: String,
    pub version: Arc<str>,
    /// Delta: resources to add or update.
    pub upserts: Vec<Arc<Resource>>,
    /// Delta: names to remove, or requested names that do not exist.
    pub removals: Vec<Arc<str>>,
    /// State of the world: every resource of the type the proxy should have.
    pub full_set: Vec<Arc<Resource>>,
    /// When what this push delivers was asked for: the snapshot's publication, or the stream's
    /// start when later.
    pub since: Instant,
}

/// Per type: subscription, the proxy's resources, and the response in flight.
#[derive(Debug)]
pub(crate) struct TypeState {
    type_url: Arc<str>,
    requested: bool,
    wildcard: bool,
    /// State of the world: a request has named resources, so an empty list no longer means `*`.
    named_explicitly: bool,
    names: HashSet<Arc<str>>,
    held: HeldSet,
    in_flight: Option<InFlight>,
    /// Nonce of the newest response (state of the world: requests naming older ones are stale).
    last_nonce: Option<String>,
    /// Resources (name, version) NACKed for the current target.
    rejected: HashMap<Arc<str>, Arc<str>>,
    answered: bool,
    /// Delta: requested names already reported as not existing.
    reported_absent: HashSet<Arc<str>>,
    /// What this type takes of the stream's budget: [`type_state_bytes`] and its subscription.
    charged: usize,
}

impl TypeState {
    fn new(type_url: Arc<str>) -> Self {
        Self {
            requested: false,
            wildcard: false,
            named_explicitly: false,
            names: HashSet::new(),
            held: HeldSet::default(),
            in_flight: None,
            last_nonce: None,
            rejected: HashMap::new(),
            answered: false,
            reported_absent: HashSet::new(),
            charged: type_state_bytes(&type_url),
            type_url,
        }
    }

    fn last_nonce(&self) -> Option<&str> {
        self.last_nonce.as_deref()
    }

    fn in_scope(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    /// State of the world: the request names the complete subscription. An empty list is a
    /// wildcard only as long as the client never named anything (the protocol's legacy rule).
    /// `share` is what the stream's subscriptions take, this type's included.
    fn replace_subscription(&mut self, names: Vec<String>, share: &mut Share) -> Result<(), PlanError> {
        self.check_lengths(names.iter())?;
        // Duplicates count twice here, so the check errs on the side of refusing.
        let cost: usize = names.iter().filter(|name| *name != "*").map(|name| name_cost(name)).sum();
        let others = share.bytes() - self.charged;
        share.reserve(others + type_state_bytes(&self.type_url) + cost)?;
        self.requested = true;
        self.named_explicitly |= !names.is_empty();
        self.wildcard = !self.named_explicitly || names.iter().any(|name| name == "*");
        let names: HashSet<Arc<str>> = names.into_iter().filter(|name| name != "*").map(Arc::from).collect();
        for name in names.difference(&self.names) {
            forget_for_resend(&mut self.held, name);
        }
        let charged =
            type_state_bytes(&self.type_url) + names.iter().map(|name| name_cost(name)).sum::<usize>();
        share.shrink_to(others + charged);
        self.charged = charged;
        self.names = names;
        self.forget_out_of_scope();
        Ok(())
    }

    /// Delta: names to add and remove, and on the type's first request the versions the proxy
    /// already has. A first request subscribing to nothing is a wildcard subscription, which
    /// names subscribed later add to (the protocol's legacy rule) until `*` is unsubscribed.
    /// A name both subscribed and unsubscribed ends unsubscribed. The work is proportional to
    /// the request, not to what the stream already holds. `share` is what the stream's
    /// subscriptions take, this type's included; the reported versions stay charged for the
    /// stream's life.
    fn update_subscription(
        &mut self,
        subscribe: Vec<String>,
        unsubscribe: Vec<String>,
        initial_versions: HashMap<String, String>,
        share: &mut Share,
    ) -> Result<(), PlanError> {
        let first = !self.requested;
        self.check_lengths(subscribe.iter().chain(&unsubscribe))?;
        if first {
            self.check_lengths(initial_versions.iter().flat_map(|(name, version)| [name, version]))?;
        }
        let removing: HashSet<&str> = unsubscribe.iter().map(String::as_str).collect();
        let released: usize =
            removing.iter().filter(|name| self.names.contains(**name)).map(|name| name_cost(name)).sum();
        let added: usize = subscribe
            .iter()
            .filter(|name| {
                *name != "*" && !removing.contains(name.as_str()) && !self.names.contains(name.as_str())
            })
            .map(|name| name_cost(name))
            .sum();
        let reported: usize = if first {
            initial_versions.iter().map(|(name, version)| name_cost(name) + version.len()).sum()
        } else {
            0
        };
        let others = share.bytes() - self.charged;
        share.reserve(share.bytes() - released + added + reported)?;

        let was_wildcard = self.wildcard;
        if first {
            self.requested = true;
            self.wildcard = subscribe.is_empty();
            self.held = HeldSet::reported(
                initial_versions
                    .into_iter()
                    .map(|(name, version)| (Arc::from(name), Held::Reported(version.into()))),
            );
            self.charged += reported;
        }
        for name in subscribe {
            if name == "*" {
                self.wildcard = true;
            } else if !removing.contains(name.as_str()) && !self.names.contains(name.as_str()) {
                let name: Arc<str> = name.into();
                forget_for_resend(&mut self.held, &name);
                self.charged += name_cost(&name);
                self.names.insert(name);
            }
        }
        for name in &removing {
            if *name == "*" {
                self.wildcard = false;
            } else {
                if self.names.remove(*name) {
                    self.charged -= name_cost(name);
                }
                self.reported_absent.remove(*name);
            }
        }
        share.shrink_to(others + self.charged);
        if first || was_wildcard {
            self.forget_out_of_scope();
        } else if !self.wildcard {
            // Without a wildcard the proxy holds only subscribed names: only these went.
            for name in &removing {
                self.held.remove(name);
            }
        }
        Ok(())
    }

    fn check_lengths<'a>(&self, names: impl Iterator<Item = &'a String>) -> Result<(), PlanError> {
        match names.map(String::len).find(|length| *length > MAX_NAME_BYTES) {
            Some(length) => Err(PlanError::NameTooLong { type_url: self.type_url.to_string(), length }),
            None => Ok(()),
        }
    }

    /// The proxy drops what it no longer subscribes to.
    fn forget_out_of_scope(&mut self) {
        if !self.wildcard {
            let names = &self.names;
            self.held.retain(|name| names.contains(name));
        }
    }

    /// Applies the ACK or NACK carried by a request naming `nonce`.
    fn settle(&mut self, nonce: &str, rejected: bool) -> Settled {
        let Some(in_flight) = self.in_flight.take_if(|in_flight| in_flight.nonce == nonce) else {
            return Settled::Unknown;
        };
        if !rejected {
            return Settled::Acked { version: in_flight.version, since: in_flight.since };
        }
        for change in in_flight.changes.into_iter().rev() {
            let current = self.held.get(&change.name).map(HeldRef::version);
            // Only what no later response changed again and is still subscribed.
            if current == change.after.as_ref().map(|resource| resource.version())
                && self.in_scope(&change.name)
            {
                let before = change.before.as_ref().and_then(Held::resource).cloned();
                self.held.insert(change.name.clone(), Held::Uncertain(before));
            }
            if let Some(after) = change.after {
                self.rejected.insert(change.name, after.shared_version().clone());
            }
        }
        Settled::Nacked { version: in_flight.version }
    }

    fn settled(&self) -> bool {
        self.in_flight.is_none() && self.rejected.is_empty()
    }

    /// The response this type needs to move toward `target`, if any; `remove` allows removing
    /// what the target no longer has (wildcard types only).
    fn push(&mut self, target: &Snapshot, remove: bool, protocol: Protocol) -> Option<PushDraft> {
        if !self.requested || self.in_flight.is_some() {
            return None;
        }
        let resources = target.resources(&self.type_url);
        let candidates: Vec<&Arc<Resource>> = if self.wildcard {
            resources.iter().collect()
        } else {
            self.names.iter().filter_map(|name| resources.get(name)).collect()
        };
        let mut upserts = Vec::new();
        for resource in candidates {
            if self.rejected.get(resource.name()).is_some_and(|version| **version == *resource.version()) {
                continue;
            }
            match self.held.get(resource.name()) {
                Some(held) if held.version() == resource.version() => {
                    // Same content as reported on reconnect: now known in full.
                    if held.reported().is_some() {
                        self.held.insert(resource.shared_name().clone(), Held::Sent(resource.clone()));
                    }
                }
                _ => upserts.push(resource.clone()),
            }
        }

        let mut removals = Vec::new();
        if remove && self.wildcard && self.rejected.is_empty() {
            removals = self
                .held
                .names()
                .filter(|name| resources.get(name).is_none() && !self.names.contains(*name))
                .cloned()
                .collect();
            removals.sort();
        }
        let mut absent = Vec::new();
        if protocol == Protocol::Delta {
            let mut newly_absent: Vec<Arc<str>> = self
                .names
                .iter()
                .filter(|name| {
                    resources.get(name).is_none()
                        && !self.held.contains(name)
                        && !self.reported_absent.contains(*name)
                })
                .cloned()
                .collect();
            newly_absent.sort();
            self.reported_absent.extend(newly_absent.iter().cloned());
            absent = newly_absent;
        }

        // The first request of a type is always answered, so Envoy's initial fetch completes
        // even when there is nothing to send (delta: its named requests get `absent` instead).
        let first_answer = !self.answered && (protocol == Protocol::StateOfTheWorld || self.wildcard);
        if upserts.is_empty() && removals.is_empty() && absent.is_empty() && !first_answer {
            return None;
        }
        self.answered = true;
        Some(PushDraft { upserts, removals, absent })
    }

    /// Records a drafted push as sent with `nonce` and returns it.
    fn record(
        &mut self,
        draft: PushDraft,
        protocol: Protocol,
        nonce: String,
        version: &Arc<str>,
        since: Instant,
    ) -> Push {
        let mut changes = Vec::with_capacity(draft.upserts.len() + draft.removals.len());
        for resource in &draft.upserts {
            let name = resource.shared_name().clone();
            self.reported_absent.remove(&name);
            let before = self.held.insert(name.clone(), Held::Sent(resource.clone()));
            changes.push(Change { name, before, after: Some(resource.clone()) });
        }
        for name in &draft.removals {
            let before = self.held.remove(name);
            changes.push(Change { name: name.clone(), before, after: None });
        }
        let mut full_set = Vec::new();
        if protocol == Protocol::StateOfTheWorld {
            full_set.extend(self.held.iter().filter_map(|(_, held)| held.resource()).cloned());
            full_set.sort_by(|a, b| a.name().cmp(b.name()));
        }
        self.in_flight = Some(InFlight { nonce: nonce.clone(), version: version.clone(), since, changes });
        self.last_nonce = Some(nonce.clone());
        let mut removals = draft.removals;
        removals.extend(draft.absent);
        Push {
            type_url: self.type_url.clone(),
            nonce,
            version: version.clone(),
            upserts: draft.upserts,
            removals,
            full_set,
            since,
        }
    }
}

#[derive(Debug)]
struct PushDraft {
    upserts: Vec<Arc<Resource>>,
    removals: Vec<Arc<str>>,
    absent: Vec<Arc<str>>,
}

/// Everything one stream knows about its proxy.
#[derive(Debug)]
pub(crate) struct StreamState {
    protocol: Protocol,
    started: Instant,
    /// By push order, then type URL. Boxed: a map node has room for 11 entries, and a stream
    /// has 4 to 6 types.
    types: BTreeMap<(u8, Arc<str>), Box<TypeState>>,
    target: Option<Published>,
    next_nonce: u64,
    /// What the subscriptions of all types take, within [`MAX_SUBSCRIBED_BYTES`] and the
    /// service's [`SubscriptionBudget`].
    subscribed: Share,
}

/// One type of a stream, as a request changes it: its subscription is charged to the stream.
pub(crate) struct TypeEntry<'a> {
    state: &'a mut TypeState,
    subscribed: &'a mut Share,
}

impl TypeEntry<'_> {
    pub fn last_nonce(&self) -> Option<&str> {
        self.state.last_nonce()
    }

    pub fn settle(&mut self, nonce: &str, rejected: bool) -> Settled {
        self.state.settle(nonce, rejected)
    }

    /// See [`TypeState::replace_subscription`].
    pub fn replace_subscription(&mut self, names: Vec<String>) -> Result<(), PlanError> {
        self.state.replace_subscription(names, self.subscribed)
    }

    /// See [`TypeState::update_subscription`].
    pub fn update_subscription(
        &mut self,
        subscribe: Vec<String>,
        unsubscribe: Vec<String>,
        initial_versions: HashMap<String, String>,
    ) -> Result<(), PlanError> {
        self.state.update_subscription(subscribe, unsubscribe, initial_versions, self.subscribed)
    }
}

impl StreamState {
    /// A new stream's state, its subscriptions charged to `subscribed` (an empty charge of the
    /// subscription budget).
    pub fn new(protocol: Protocol, started: Instant, subscribed: Charge) -> Self {
        let subscribed = Share::from(subscribed);
        Self { protocol, started, types: BTreeMap::new(), target: None, next_nonce: 0, subscribed }
    }

    /// Moves toward a new snapshot (or, with `None`, stops pushing: the fleet was removed).
    pub fn set_target(&mut self, target: Option<Published>) {
        let unchanged = match (&self.target, &target) {
            (Some(current), Some(new)) => current.snapshot.version() == new.snapshot.version(),
            _ => false,
        };
        if !unchanged {
            for state in self.types.values_mut() {
                state.rejected.clear();
            }
        }
        self.target = target;
    }

    /// When the proxy was first owed the current target: its publication, or the stream's
    /// start when later.
    pub fn target_since(&self) -> Option<Instant> {
        self.target.as_ref().map(|target| target.set_at.max(self.started))
    }

    /// The state of a type the request names, created on its first request.
    pub fn type_state(&mut self, type_url: &str) -> Result<TypeEntry<'_>, PlanError> {
        if type_url.len() > MAX_TYPE_URL_BYTES {
            return Err(PlanError::TypeUrlTooLong { length: type_url.len() });
        }
        let url = Arc::<str>::from(type_url);
        let key = (push_rank(type_url), url.clone());
        if !self.types.contains_key(&key) {
            if self.types.len() >= MAX_TYPES {
                return Err(PlanError::TooManyTypes);
            }
            self.subscribed.reserve(self.subscribed.bytes() + type_state_bytes(type_url))?;
        }
        let state: &mut TypeState = self.types.entry(key).or_insert_with(|| Box::new(TypeState::new(url)));
        Ok(TypeEntry { state, subscribed: &mut self.subscribed })
    }

    /// The responses to send now, in order, each recorded as in flight.
    pub fn plan(&mut self) -> Vec<Push> {
        let (Some(target), Some(since)) = (self.target.clone(), self.target_since()) else {
            return Vec::new();
        };
        let snapshot = &target.snapshot;
        let mut pushes = self.plan_stage(Stage::Upstream, false, snapshot, since);
        if !pushes.is_empty() || !self.stage_settled(Stage::Upstream, snapshot) {
            return pushes;
        }
        pushes = self.plan_stage(Stage::Downstream, true, snapshot, since);
        if !pushes.is_empty() || !self.stage_settled(Stage::Downstream, snapshot) {
            return pushes;
        }
        self.plan_stage(Stage::Upstream, true, snapshot, since)
    }

    fn plan_stage(
        &mut self,
        wanted: Stage,
        remove: bool,
        snapshot: &Arc<Snapshot>,
        since: Instant,
    ) -> Vec<Push> {
        let mut pushes = Vec::new();
        let protocol = self.protocol;
        for ((_, type_url), state) in &mut self.types {
            if stage(type_url) != wanted {
                continue;
            }
            let pushed = state.push(snapshot, remove, protocol).map(|draft| {
                self.next_nonce += 1;
                state.record(draft, protocol, self.next_nonce.to_string(), snapshot.shared_version(), since)
            });
            let TypeState { held, type_url, .. } = &mut **state;
            held.rebase(snapshot, type_url, pushed.is_some());
            pushes.extend(pushed);
        }
        pushes
    }

    fn stage_settled(&self, wanted: Stage, snapshot: &Snapshot) -> bool {
        let types_settled =
            self.types.iter().filter(|((_, url), _)| stage(url) == wanted).all(|(_, s)| s.settled());
        let referrer = match wanted {
            Stage::Upstream => type_url::CLUSTER,
            Stage::Downstream => type_url::LISTENER,
        };
        types_settled && self.references_delivered(referrer, snapshot)
    }

    /// Whether everything the proxy's `referrer_type` resources make it request (and the target
    /// has) was delivered at the target's version.
    fn references_delivered(&self, referrer_type: &str, snapshot: &Snapshot) -> bool {
        let Some(referrers) = self.get(referrer_type) else { return true };
        let referring = referrers.held.iter().filter_map(|(name, held)| match held.reported() {
            None => held.resource(),
            Some(version) => {
                snapshot.resources(referrer_type).get(name).filter(|resource| resource.version() == version)
            }
        });
        let delivered = |reference: &Reference| {
            let Some(wanted) = snapshot.resources(reference.type_url).get(&reference.name) else {
                return true;
            };
            self.get(reference.type_url)
                .and_then(|state| state.held.get(reference.name.as_str()))
                .is_some_and(|held| held.version() == wanted.version())
        };
        referring.flat_map(|resource| resource.references()).all(delivered)
    }

    fn get(&self, type_url: &str) -> Option<&TypeState> {
        self.types.get(&(push_rank(type_url), Arc::from(type_url))).map(|state| &**state)
    }

    /// The target's version once the proxy has all of it: nothing in flight or rejected, every
    /// reference delivered, and the listeners and clusters requested if the target has some.
    pub fn synced_version(&self) -> Option<Arc<str>> {
        let target = self.target.as_ref()?;
        let snapshot = &target.snapshot;
        let wildcard_types_requested = [type_url::LISTENER, type_url::CLUSTER].into_iter().all(|type_url| {
            snapshot.resources(type_url).is_empty() || self.get(type_url).is_some_and(|state| state.requested)
        });
        let settled =
            self.stage_settled(Stage::Upstream, snapshot) && self.stage_settled(Stage::Downstream, snapshot);
        (wildcard_types_requested && settled && self.nothing_to_send(snapshot))
            .then(|| snapshot.shared_version().clone())
    }

    fn nothing_to_send(&self, snapshot: &Snapshot) -> bool {
        self.types.values().all(|state| {
            let resources = snapshot.resources(&state.type_url);
            let current = |resource: &Arc<Resource>| {
                state.held.get(resource.name()).is_some_and(|held| held.version() == resource.version())
            };
            let all_delivered = if state.wildcard {
                resources.iter().all(current)
            } else {
                state.names.iter().filter_map(|name| resources.get(name)).all(current)
            };
            let nothing_extra = !state.wildcard
                || state.held.names().all(|name| resources.get(name).is_some() || state.names.contains(name));
            all_delivered && nothing_extra
        })
    }
}

#[cfg(test)]
mod sizes {
    use super::*;

    #[test]
    fn a_type_takes_at_most_what_the_connection_budget_counts() {
        // The map's entry (key and box pointer) twice for half-full nodes, the boxes' and the
        // type URL's allocations (its header: `type_state_bytes` adds its length), two nonces
        // of 20 digits.
        let entry = std::mem::size_of::<(u8, Arc<str>)>() + std::mem::size_of::<Box<TypeState>>();
        let url = 2 * std::mem::size_of::<usize>();
        let nonces = 2 * 20;
        let worst = std::mem::size_of::<TypeState>() + 2 * entry + url + nonces;
        assert!(worst <= TYPE_STATE_BYTES, "a type takes up to {worst} bytes, over {TYPE_STATE_BYTES}");
    }
}
