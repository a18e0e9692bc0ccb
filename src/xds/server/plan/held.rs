//! What a proxy holds of one type, as its stream knows it: for each name, the [`Held`] version.
//!
//! Kept as its difference from the resources of the type in one snapshot, which every stream
//! synced to that snapshot shares: a stream whose proxy holds what its target has keeps no
//! entry of its own. A map of every resource held, per stream, took about 40–80 bytes a
//! resource: for a mesh's sidecars, each holding its fleet's thousands of clusters, endpoints
//! and routes, more than the whole connection. Now a stream costs what its proxy differs by
//! (resources it NACKed, or reported on reconnecting, or has yet to be sent).
//!
//! The base is chosen again whenever the stream records a push and once for each new snapshot
//! ([`HeldSet::rebase`]): the newest snapshot, or none when the proxy holds so little of it
//! that naming what it lacks would take as many entries as naming what it has (a few named
//! resources of many).

use std::collections::HashMap;
use std::sync::Arc;

use super::super::resource::Resource;
use super::super::snapshot::{Snapshot, TypeResources};
use super::Held;

#[derive(Debug, Default)]
pub(super) struct HeldSet {
    /// What the proxy holds (the resources of a type of a snapshot), but for `differences`.
    base: Option<Base>,
    /// Where the proxy differs from the base: a name it holds otherwise (`Some`), or not at
    /// all (`None`, only for a name the base has).
    differences: HashMap<Arc<str>, Option<Held>>,
    /// The snapshot last considered as a base (its address).
    considered: usize,
    /// The same set as a plain map, kept in tests: every change is checked against it.
    #[cfg(test)]
    shadow: HashMap<Arc<str>, Held>,
}

#[derive(Debug)]
struct Base {
    snapshot: Arc<Snapshot>,
    type_url: Arc<str>,
}

impl Base {
    fn resources(&self) -> &TypeResources {
        self.snapshot.resources(&self.type_url)
    }
}

/// What the proxy holds as one name, borrowed: the base's resource, or the stream's own entry.
/// Borrowed rather than cloned: a resource's `Arc` is shared by every stream, and counting its
/// references from every stream on every change contends across the runtime's threads.
#[derive(Clone, Copy, Debug)]
pub(super) enum HeldRef<'a> {
    Base(&'a Arc<Resource>),
    Own(&'a Held),
}

impl<'a> HeldRef<'a> {
    pub fn version(self) -> &'a str {
        match self {
            HeldRef::Base(resource) => resource.version(),
            HeldRef::Own(held) => held.version(),
        }
    }

    /// The resource, where the stream knows it (sent, or uncertain after a NACK).
    pub fn resource(self) -> Option<&'a Arc<Resource>> {
        match self {
            HeldRef::Base(resource) => Some(resource),
            HeldRef::Own(held) => held.resource(),
        }
    }

    /// The version a reconnecting proxy reported, if that is all the stream knows.
    pub fn reported(self) -> Option<&'a str> {
        match self {
            HeldRef::Own(Held::Reported(version)) => Some(version),
            _ => None,
        }
    }

    pub fn to_owned(self) -> Held {
        match self {
            HeldRef::Base(resource) => Held::Sent(resource.clone()),
            HeldRef::Own(held) => held.clone(),
        }
    }

    /// Whether this is what a base with `resource` says the proxy has.
    fn matches(self, resource: &Resource) -> bool {
        // Versions follow content, so the base's copy stands for the one sent.
        match self {
            HeldRef::Base(base) => base.version() == resource.version(),
            HeldRef::Own(Held::Sent(sent)) => sent.version() == resource.version(),
            HeldRef::Own(_) => false,
        }
    }
}

impl HeldSet {
    /// The versions a reconnecting proxy reports.
    pub fn reported(versions: impl IntoIterator<Item = (Arc<str>, Held)>) -> Self {
        let differences: HashMap<_, _> =
            versions.into_iter().map(|(name, held)| (name, Some(held))).collect();
        Self {
            #[cfg(test)]
            shadow: differences
                .iter()
                .filter_map(|(name, held)| Some((name.clone(), held.clone()?)))
                .collect(),
            base: None,
            differences,
            considered: 0,
        }
    }

    pub fn get(&self, name: &str) -> Option<HeldRef<'_>> {
        match self.differences.get(name) {
            Some(held) => held.as_ref().map(HeldRef::Own),
            None => self.base_resource(name).map(HeldRef::Base),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Records that the proxy holds `held` as `name`; what it held before.
    pub fn insert(&mut self, name: Arc<str>, held: Held) -> Option<Held> {
        let before = self.get(&name).map(HeldRef::to_owned);
        #[cfg(test)]
        self.shadow.insert(name.clone(), held.clone());
        match self.base_resource(&name) {
            Some(resource) if HeldRef::Own(&held).matches(resource) => {
                self.differences.remove(&name);
            }
            _ => {
                self.differences.insert(name, Some(held));
            }
        }
        self.check();
        before
    }

    /// Records that the proxy no longer holds `name`; what it held.
    pub fn remove(&mut self, name: &str) -> Option<Held> {
        let before = self.get(name).map(HeldRef::to_owned);
        #[cfg(test)]
        self.shadow.remove(name);
        match self.base_resource(name).map(|resource| resource.shared_name().clone()) {
            Some(name) => {
                self.differences.insert(name, None);
            }
            None => {
                self.differences.remove(name);
            }
        }
        self.check();
        before
    }

    /// Keeps only the names `keep` accepts.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        #[cfg(test)]
        self.shadow.retain(|name, _| keep(name));
        let base = self.base.as_ref().map(Base::resources);
        self.differences.retain(|name, held| {
            if keep(name) {
                return true;
            }
            *held = None;
            base.is_some_and(|base| base.get(name).is_some())
        });
        if let Some(base) = base {
            for resource in base.iter() {
                if !keep(resource.name()) && !self.differences.contains_key(resource.name()) {
                    self.differences.insert(resource.shared_name().clone(), None);
                }
            }
        }
        self.check();
    }

    /// Every name the proxy holds.
    pub fn names(&self) -> impl Iterator<Item = &Arc<str>> {
        self.iter().map(|(name, _)| name)
    }

    /// Every name the proxy holds, with what it holds.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, HeldRef<'_>)> {
        let resources = self.base.iter().flat_map(|base| base.resources().iter());
        let from_base = resources
            .filter(|resource| !self.differences.contains_key(resource.name()))
            .map(|resource| (resource.shared_name(), HeldRef::Base(resource)));
        let own =
            self.differences.iter().filter_map(|(name, held)| Some((name, HeldRef::Own(held.as_ref()?))));
        from_base.chain(own)
    }

    /// Takes the type's resources in `snapshot` as the base, if that makes the differences
    /// fewer than the names held, and no base otherwise: what the proxy holds is unchanged.
    /// Done once a snapshot and after a push (`changed`), so that a stream lets go of the
    /// snapshots it synced to before.
    pub fn rebase(&mut self, snapshot: &Arc<Snapshot>, type_url: &Arc<str>, changed: bool) {
        if let Some(base) = &self.base
            && Arc::ptr_eq(&base.snapshot, snapshot)
        {
            // `insert` and `remove` keep the differences from this base as few as can be;
            // only whether no base would take as few entries is left to see.
            let resources = base.resources();
            let overriding = self.differences.keys().filter(|name| resources.get(name).is_some()).count();
            let own = self.differences.values().filter(|held| held.is_some()).count();
            let held = resources.len() - overriding + own;
            if self.differences.len() >= held {
                self.drop_base();
            }
            return;
        }
        // Only an address to compare: a snapshot freed and another at its address only means
        // a rebase skipped, which changes no content.
        let address = Arc::as_ptr(snapshot) as usize;
        if !changed && self.considered == address {
            return;
        }
        self.considered = address;
        let resources = snapshot.resources(type_url);
        let (mut held, mut same) = (0, 0);
        for (name, current) in self.iter() {
            held += 1;
            same += usize::from(resources.get(name).is_some_and(|resource| current.matches(resource)));
        }
        // On the new base: what is held otherwise, and what the base has that is not held.
        let on_new_base = (held - same) + (resources.len() - same);
        if on_new_base >= held {
            if self.base.is_some() {
                self.drop_base();
            }
            return;
        }
        let mut differences = HashMap::with_capacity(on_new_base);
        for (name, current) in self.iter() {
            if !resources.get(name).is_some_and(|resource| current.matches(resource)) {
                differences.insert(name.clone(), Some(current.to_owned()));
            }
        }
        for resource in resources.iter() {
            if !self.contains(resource.name()) {
                differences.insert(resource.shared_name().clone(), None);
            }
        }
        self.base = Some(Base { snapshot: snapshot.clone(), type_url: type_url.clone() });
        self.differences = differences;
        self.check();
    }

    /// Keeps every name held as the stream's own.
    fn drop_base(&mut self) {
        let held: HashMap<_, _> =
            self.iter().map(|(name, held)| (name.clone(), Some(held.to_owned()))).collect();
        self.base = None;
        self.differences = held;
        self.check();
    }

    /// Entries of this stream's own (for tests of what a stream keeps).
    #[cfg(test)]
    pub fn own_entries(&self) -> usize {
        self.differences.len()
    }

    fn base_resource(&self, name: &str) -> Option<&Arc<Resource>> {
        self.base.as_ref()?.resources().get(name)
    }

    /// In tests: the set is the one its changes describe.
    fn check(&self) {
        #[cfg(test)]
        {
            let mut held: Vec<(String, String, bool)> = self
                .iter()
                .map(|(name, held)| {
                    let sent = matches!(held, HeldRef::Base(_) | HeldRef::Own(Held::Sent(_)));
                    (name.to_string(), held.version().to_string(), sent)
                })
                .collect();
            let mut shadow: Vec<(String, String, bool)> = self
                .shadow
                .iter()
                .map(|(name, held)| {
                    (name.to_string(), held.version().to_string(), matches!(held, Held::Sent(_)))
                })
                .collect();
            held.sort();
            shadow.sort();
            assert_eq!(held, shadow, "the held set differs from the changes made to it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::resource::type_url::CLUSTER;
    use super::super::super::tests::snapshot;
    use super::*;

    /// A snapshot of `count` EDS clusters (and their endpoints).
    fn clusters(count: usize) -> Arc<Snapshot> {
        let names: Vec<String> = (0..count).map(|i| format!("c{i}")).collect();
        let clusters: Vec<(&str, u16)> = names.iter().map(|name| (name.as_str(), 1)).collect();
        Arc::new(snapshot(Vec::new(), &clusters))
    }

    fn send_all(held: &mut HeldSet, snapshot: &Snapshot) {
        for resource in snapshot.resources(CLUSTER).iter() {
            held.insert(resource.shared_name().clone(), Held::Sent(resource.clone()));
        }
    }

    #[test]
    fn a_proxy_holding_its_target_costs_its_stream_no_entry_and_differences_one_each() {
        let (v1, url) = (clusters(100), Arc::<str>::from(CLUSTER));
        let mut held = HeldSet::default();
        send_all(&mut held, &v1);
        assert_eq!(held.own_entries(), 100, "without a base, an entry a resource");
        held.rebase(&v1, &url, true);
        assert_eq!((held.own_entries(), held.names().count()), (0, 100));
        assert_eq!(
            held.get("c7").map(|held| held.version().to_owned()),
            Some(v1.resources(CLUSTER).get("c7").unwrap().version().to_owned())
        );

        // A NACKed resource and a removed one are the stream's own.
        held.insert("c1".into(), Held::Uncertain(None));
        held.remove("c2");
        assert_eq!((held.own_entries(), held.names().count()), (2, 99));
        assert!(!held.contains("c2") && held.contains("c1"));

        // A later snapshot with one more cluster: the proxy lacks it, and keeps its own two.
        let v2 = clusters(101);
        held.rebase(&v2, &url, false);
        assert_eq!((held.own_entries(), held.names().count()), (3, 99));
        assert_eq!(Arc::strong_count(&v1), 1, "the stream let go of the snapshot it synced to before");
        // Sent, the new cluster leaves the differences.
        let new = v2.resources(CLUSTER).get("c100").unwrap().clone();
        held.insert(new.shared_name().clone(), Held::Sent(new));
        assert_eq!(held.own_entries(), 2);
    }

    #[test]
    fn a_few_named_resources_of_many_are_kept_without_a_base() {
        let (snapshot, url) = (clusters(100), Arc::<str>::from(CLUSTER));
        let mut held = HeldSet::default();
        for name in ["c3", "c4", "c5"] {
            let resource = snapshot.resources(CLUSTER).get(name).unwrap().clone();
            held.insert(resource.shared_name().clone(), Held::Sent(resource));
        }
        held.rebase(&snapshot, &url, true);
        assert_eq!((held.own_entries(), held.names().count()), (3, 3));
        assert_eq!(Arc::strong_count(&snapshot), 1, "no base: the snapshot is not held");
        held.retain(|name| name != "c4");
        assert_eq!(held.names().count(), 2);
    }

    #[test]
    fn keeping_some_names_of_a_base_marks_the_others_gone() {
        let (snapshot, url) = (clusters(10), Arc::<str>::from(CLUSTER));
        let mut held = HeldSet::reported([("c1".into(), Held::Reported("old".into()))]);
        send_all(&mut held, &snapshot);
        held.rebase(&snapshot, &url, true);
        assert_eq!(held.own_entries(), 0, "c1, sent since it was reported, is the base's");
        held.retain(|name| name < "c5");
        assert_eq!((held.own_entries(), held.names().count()), (5, 5));
        // Naming the 5 held takes no more entries than naming the 5 gone: the base goes.
        held.rebase(&snapshot, &url, true);
        assert_eq!((held.own_entries(), held.names().count()), (5, 5));
        assert_eq!(Arc::strong_count(&snapshot), 1);
    }
}
