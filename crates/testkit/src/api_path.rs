//! The parts of an API server path: group, version, resource, namespace, name, subresource.

/// What a path names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub resource: String,
    /// `None` for cluster-scoped resources and for lists across every namespace.
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    /// Parses `/api/v1/...` and `/apis/<group>/<version>/...`.
    pub fn parse(path: &str) -> Option<Self> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match segments.as_slice() {
            ["api", version, rest @ ..] => (String::new(), (*version).to_owned(), rest),
            ["apis", group, version, rest @ ..] => ((*group).to_owned(), (*version).to_owned(), rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (Some((*namespace).to_owned()), rest),
            rest => (None, rest),
        };
        let owned = |s: &&str| (*s).to_owned();
        match rest {
            [resource] => {
                Some(Self { group, version, resource: owned(resource), namespace, ..Self::default() })
            }
            [resource, name] => Some(Self {
                group,
                version,
                resource: owned(resource),
                namespace,
                name: Some(owned(name)),
                subresource: None,
            }),
            [resource, name, sub] => Some(Self {
                group,
                version,
                resource: owned(resource),
                namespace,
                name: Some(owned(name)),
                subresource: Some(owned(sub)),
            }),
            _ => None,
        }
    }
}
