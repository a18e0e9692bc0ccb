//! What a reconcile tells about its parent, decided from what became of each child: the
//! sample-controller's name-clash rule (never adopt a child another owner controls: degrade
//! the parent, warn with an event, retry), the `Synced` event when something was written, and
//! the notes of children deleted after a rename.

use super::status::Blocker;

/// What became of one child in a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// The cluster already held it as desired: nothing was sent.
    Current,
    /// It was created or corrected.
    Applied,
    /// Its name is taken by an object this parent does not control: left alone.
    Clash,
    /// Not attempted: a child it depends on clashed.
    NotReached,
}

/// One child of a reconcile: its kind, name and fate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child {
    pub kind: &'static str,
    pub name: String,
    pub state: ChildState,
}

/// An event to record about the parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    pub warning: bool,
    pub reason: &'static str,
    pub note: String,
    pub action: &'static str,
}

/// The outcome of a reconcile's children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A child's name is held by another owner: the status is degraded with `blocker`, a
    /// Warning event says so, and the reconcile fails (retried with backoff) naming the child.
    Clash { kind: &'static str, name: String, blocker: Blocker, notice: Notice },
    /// Every child is in place; `notice` (`Synced`) when something was written.
    InPlace { notice: Option<Notice> },
}

/// Decides the report of a `parent_kind` from its children, in the order they were ensured.
/// The first clash wins. A parent with children of several kinds names the child's kind in
/// the message; a Foo's says, as the sample-controller does, `Resource "x" already exists…`.
pub fn report(parent_kind: &str, children: &[Child]) -> Report {
    if let Some(clash) = children.iter().find(|child| child.state == ChildState::Clash) {
        let resource =
            format!("Resource {:?} already exists and is not managed by {parent_kind}", clash.name);
        let message = if children.len() > 1 { format!("{} {resource}", clash.kind) } else { resource };
        return Report::Clash {
            kind: clash.kind,
            name: clash.name.clone(),
            blocker: Blocker::NameClash { message: message.clone() },
            notice: Notice {
                warning: true,
                reason: super::status::REASON_RESOURCE_EXISTS,
                note: message,
                action: "Reconcile",
            },
        };
    }
    let wrote = children.iter().any(|child| child.state == ChildState::Applied);
    Report::InPlace {
        notice: wrote.then(|| Notice {
            warning: false,
            reason: "Synced",
            note: format!("{parent_kind} synced successfully"),
            action: "Reconcile",
        }),
    }
}

/// The Warning event for a spec the rules reject.
pub fn invalid_spec(blocker: &Blocker) -> Notice {
    Notice {
        warning: true,
        reason: super::status::REASON_INVALID_SPEC,
        note: blocker.message().to_owned(),
        action: "Validate",
    }
}

/// The Warning event for a Service cluster IP the API server refuses.
pub fn address_not_usable(blocker: &Blocker) -> Notice {
    Notice {
        warning: true,
        reason: super::status::REASON_ADDRESS_NOT_USABLE,
        note: blocker.message().to_owned(),
        action: "Reconcile",
    }
}

/// The event for a Service deleted to take another cluster IP (`spec.serviceClusterIP`): a
/// Service's cluster IP cannot change.
pub fn service_replaced(name: &str, held: &str, wanted: &str) -> Notice {
    Notice {
        warning: false,
        reason: "ReplacedService",
        note: format!(
            "Deleted Service {name:?} holding cluster IP {held} to recreate it with {wanted} (spec.serviceClusterIP)"
        ),
        action: "Delete",
    }
}

/// The event for a child deleted because the current spec names another: a Foo's renamed
/// Deployment, or any child an Envoy no longer names.
pub fn pruned(parent_kind: &str, kind: &str, name: &str, current: &str) -> Notice {
    let (reason, note) = match parent_kind {
        "Foo" => (
            "DeletedOldDeployment",
            format!("Deleted {kind} {name:?}: spec.deploymentName is now {current:?}"),
        ),
        _ => ("DeletedOldChild", format!("Deleted {name:?}, which the current spec no longer names")),
    };
    Notice { warning: false, reason, note, action: "Delete" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(kind: &'static str, name: &str, state: ChildState) -> Child {
        Child { kind, name: name.to_owned(), state }
    }

    #[test]
    fn a_foo_clash_reads_like_the_sample_controller() {
        let Report::Clash { kind, name, blocker, notice } =
            report("Foo", &[child("Deployment", "web", ChildState::Clash)])
        else {
            panic!("a clash");
        };
        assert_eq!((kind, name.as_str()), ("Deployment", "web"));
        assert_eq!(blocker.message(), "Resource \"web\" already exists and is not managed by Foo");
        assert!(notice.warning);
        assert_eq!(notice.reason, "ErrResourceExists");
    }

    #[test]
    fn the_first_clash_of_several_kinds_names_its_kind() {
        let children = [
            child("ConfigMap", "cfg", ChildState::Current),
            child("Deployment", "fleet", ChildState::Clash),
            child("Service", "fleet", ChildState::NotReached),
        ];
        let Report::Clash { blocker, .. } = report("Envoy", &children) else { panic!("a clash") };
        assert_eq!(
            blocker.message(),
            "Deployment Resource \"fleet\" already exists and is not managed by Envoy"
        );
    }

    #[test]
    fn synced_only_when_something_was_written() {
        let current = [child("Deployment", "web", ChildState::Current)];
        assert_eq!(report("Foo", &current), Report::InPlace { notice: None });
        let applied = [child("Deployment", "web", ChildState::Applied)];
        let Report::InPlace { notice: Some(notice) } = report("Foo", &applied) else { panic!("synced") };
        assert_eq!((notice.reason, notice.note.as_str()), ("Synced", "Foo synced successfully"));
    }
}
