use super::{FieldErrors, Rules, Warnings, check_format, check_replicas, format};
use crate::api::Foo;

/// Replicas of a Foo that does not say.
pub const DEFAULT_REPLICAS: i32 = 1;

impl Rules for Foo {
    fn apply_defaults(&mut self) {
        if self.spec.deployment_name.is_none() {
            // Absent while a `generateName` object is admitted; the reconciler defaults it later.
            self.spec.deployment_name = self.metadata.name.clone();
        }
        self.spec.replicas.get_or_insert(DEFAULT_REPLICAS);
    }

    fn validate(&self, old: Option<&Self>) -> Result<Warnings, FieldErrors> {
        let mut errors = FieldErrors::default();
        let mut warnings = Warnings::new();
        let spec = &self.spec;

        if let Some(name) = &spec.deployment_name {
            check_format(&mut errors, "spec.deploymentName", name, format::dns1123_subdomain(name));
        }
        check_replicas(&mut errors, "spec.replicas", spec.replicas);
        if spec.replicas == Some(0) {
            warnings.push("spec.replicas: 0: the Deployment is scaled to zero and serves nothing".to_owned());
        }

        if let Some(old) = old {
            let (before, after) = (effective_deployment_name(old), effective_deployment_name(self));
            if let (Some(before), Some(after)) = (before, after)
                && before != after
            {
                warnings.push(format!(
                    "spec.deploymentName: changing from {before:?} to {after:?} replaces the Deployment: {after:?} is created and {before:?} is deleted with its pods"
                ));
            }
        }

        errors.into_result().map(|()| warnings)
    }
}

/// The Deployment name a Foo asks for, defaulted from its own name.
pub fn effective_deployment_name(foo: &Foo) -> Option<&str> {
    foo.spec.deployment_name.as_deref().or(foo.metadata.name.as_deref())
}
