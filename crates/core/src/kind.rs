//! The kinds this operator serves and admits (Foo, Envoy, EnvoyRoute): their group, version,
//! kind and plural, and what a manifest's `apiVersion` and `kind` name. What admission does
//! with each kind is in [`crate::admission`]; the schema each is checked against, in
//! [`crate::structural`].

use std::borrow::Cow;

use kube::Resource;

use crate::api::{Envoy, EnvoyRoute, Foo};

/// The kinds this operator admits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AdmittedKind {
    Foo,
    Envoy,
    EnvoyRoute,
}

impl AdmittedKind {
    pub const ALL: [AdmittedKind; 3] = [AdmittedKind::Foo, AdmittedKind::Envoy, AdmittedKind::EnvoyRoute];

    /// The kind for an API group and kind name (any version: the API server converts).
    pub fn from_group_kind(group: &str, kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.group() == group && k.kind() == kind)
    }

    /// The kind for a manifest's `apiVersion` and `kind`, which must match the served version.
    pub fn from_type_meta(api_version: &str, kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.api_version() == api_version && k.kind() == kind)
    }

    /// What a manifest's `apiVersion` and `kind` name: one of these kinds (`Ok(Some)`), something
    /// else (`Ok(None)`), or one of these kinds at a version or spelling the API server does not
    /// serve (`Err`, saying what it does serve), which `kubectl apply` would refuse.
    pub fn resolve(api_version: &str, kind: &str) -> Result<Option<Self>, String> {
        if let Some(served) = Self::from_type_meta(api_version, kind) {
            return Ok(Some(served));
        }
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        let ours = Self::ALL.into_iter().find(|k| k.kind().eq_ignore_ascii_case(kind) && k.group() == group);
        match ours {
            Some(ours) if ours.kind() == kind => Err(format!(
                "{kind} is served as {}, not {api_version} (the API server has no such version)",
                ours.api_version()
            )),
            Some(ours) => Err(format!(
                "no kind {kind:?} in {group}: kinds are case-sensitive; did you mean {} ({})?",
                ours.kind(),
                ours.api_version()
            )),
            None => Ok(None),
        }
    }

    pub fn group(self) -> Cow<'static, str> {
        match self {
            Self::Foo => Foo::group(&()),
            Self::Envoy => Envoy::group(&()),
            Self::EnvoyRoute => EnvoyRoute::group(&()),
        }
    }

    pub fn kind(self) -> Cow<'static, str> {
        match self {
            Self::Foo => Foo::kind(&()),
            Self::Envoy => Envoy::kind(&()),
            Self::EnvoyRoute => EnvoyRoute::kind(&()),
        }
    }

    pub fn api_version(self) -> Cow<'static, str> {
        match self {
            Self::Foo => Foo::api_version(&()),
            Self::Envoy => Envoy::api_version(&()),
            Self::EnvoyRoute => EnvoyRoute::api_version(&()),
        }
    }

    /// Plural resource name, as in webhook rules and API paths.
    pub fn plural(self) -> Cow<'static, str> {
        match self {
            Self::Foo => Foo::plural(&()),
            Self::Envoy => Envoy::plural(&()),
            Self::EnvoyRoute => EnvoyRoute::plural(&()),
        }
    }
}
