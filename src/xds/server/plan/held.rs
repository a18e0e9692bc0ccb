//! What a proxy holds of one type, as its stream knows it: for each name, the [`Held`] version.
//!
//! Kept as its difference from the resources of the type in one snapshot, which every stream
//! synced to that snapshot shares: a stream whose proxy holds what its target has keeps no
//! entry of its own. A map of every resource held, per stream, took about 40–80 bytes a
//! resource: for a mesh's sidecars, each holding its fleet's thousands of clusters, endpoints
//! and routes, more than the whole connection. Now a stream costs what its proxy differs by
//! (resources it NACKed, or reported on reconnecting, or has yet to be sent).
//!
//! The base is chosen again whenever the stream records a push ([`HeldSet::rebase`]): the
//! snapshot pushed from, or none when the proxy holds so little of it that naming what it
//! lacks would take more entries than naming what it has (a few named resources of many).

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

/// Whether `held` is what the base's `resource` says the proxy has.
fn matches_base(held: &Held, resource: &Resource) -> bool {
    // Versions follow content, so the base's copy stands for the one sent.
    matches!(held, Held::Sent(sent) if sent.version() == resource.version())
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

    pub fn get(&self, name: &str) -> Option<Held> {
        match self.differences.get(name) {
            Some(held) => held.clone(),
            None => self.base.as_ref()?.resources().get(name).map(|resource| Held::Sent(resource.clone())),
        }
    }

    pub fn contains(&self, name: &str) -> bool {
        match self.differences.get(name) {
            Some(held) => held.is_some(),
            None => self.base.as_ref().is_some_and(|base| base.resources().get(name).is_some()),
        }
    }

    /// Records that the proxy holds `held` as `name`; what it held before.
    pub fn insert(&mut self, name: Arc<str>, held: Held) -> Option<Held> {
        let before = self.get(&name);
        #[cfg(test)]
        self.shadow.insert(name.clone(), held.clone());
        match self.base_resource(&name) {
            Some(resource) if matches_base(&held, resource) => {
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
        let before = self.get(name);
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
        let from_base = self.held_as_based().map(|resource| resource.shared_name());
        let own = self.differences.iter().filter_map(|(name, held)| held.as_ref().map(|_| name));
        from_base.chain(own)
    }

    /// Every name the proxy holds, with what it holds.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, Held)> {
        let from_base =
            self.held_as_based().map(|resource| (resource.shared_name(), Held::Sent(resource.clone())));
        let own = self.differences.iter().filter_map(|(name, held)| Some((name, held.clone()?)));
        from_base.chain(own)
    }

    /// Takes the type's resources in `snapshot` as the base, if that makes the differences
    /// fewer than the names held, and no base otherwise: what the proxy holds is unchanged.
    /// Done once a snapshot (again after a change), so that a stream lets go of the
    /// snapshots it synced to before.
    pub fn rebase(&mut self, snapshot: &Arc<Snapshot>, type_url: &Arc<str>, changed: bool) {
        // Only an address to compare: a snapshot freed and another at its address only means
        // a rebase skipped, which changes no content.
        let address = Arc::as_ptr(snapshot) as usize;
        if !changed && self.considered == address {
            return;
        }
        self.considered = address;
        let resources = snapshot.resources(type_url);
        let held: Vec<(Arc<str>, Held)> = self.iter().map(|(name, held)| (name.clone(), held)).collect();
        let same = held
            .iter()
            .filter(|(name, held)| resources.get(name).is_some_and(|resource| matches_base(held, resource)))
            .count();
        // On the new base: what is held otherwise, and what the base has that is not held.
        let on_new_base = (held.len() - same) + (resources.len() - same);
        let (base, differences) = if on_new_base < held.len() {
            let mut differences: HashMap<Arc<str>, Option<Held>> = held
                .into_iter()
                .filter(|(name, held)| {
                    !resources.get(name).is_some_and(|resource| matches_base(held, resource))
                })
                .map(|(name, held)| (name, Some(held)))
                .collect();
            for resource in resources.iter() {
                if !self.contains(resource.name()) {
                    differences.insert(resource.shared_name().clone(), None);
                }
            }
            let base = Base { snapshot: snapshot.clone(), type_url: type_url.clone() };
            (Some(base), differences)
        } else {
            (None, held.into_iter().map(|(name, held)| (name, Some(held))).collect())
        };
        self.base = base;
        self.differences = differences;
        self.check();
    }

    /// Entries of this stream's own (for tests of what a stream keeps).
    #[cfg(test)]
    pub fn own_entries(&self) -> usize {
        self.differences.len()
    }

    /// The base's resources the proxy holds as the base has them.
    fn held_as_based(&self) -> impl Iterator<Item = &Arc<Resource>> {
        let resources = self.base.iter().flat_map(|base| base.resources().iter());
        resources.filter(|resource| !self.differences.contains_key(resource.name()))
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
                    (name.to_string(), held.version().to_string(), matches!(held, Held::Sent(_)))
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
    }
}
