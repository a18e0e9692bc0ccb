use super::{FieldErrors, Rules, Warnings, check_format, check_name_fits_label, check_replicas, format};
use crate::api::Foo;
use crate::names::DEFAULT_REPLICAS;

/// A defaulted Foo's spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectiveFoo {
    /// The Deployment's name; empty only for an object without a name yet (admitted with
    /// `generateName`), which has no children until it is named.
    pub deployment_name: String,
    pub replicas: i32,
}

impl Rules for Foo {
    type Effective = EffectiveFoo;

    fn apply_defaults(&mut self) -> EffectiveFoo {
        if self.spec.deployment_name.is_none() {
            // Absent while a `generateName` object is admitted; the reconciler defaults it later.
            self.spec.deployment_name = self.metadata.name.clone();
        }
        EffectiveFoo {
            deployment_name: self.spec.deployment_name.clone().unwrap_or_default(),
            replicas: *self.spec.replicas.get_or_insert(DEFAULT_REPLICAS),
        }
    }

    fn validate(&self, old: Option<&Self>) -> Result<Warnings, FieldErrors> {
        let mut errors = FieldErrors::default();
        let mut warnings = Warnings::new();
        let spec = &self.spec;

        check_name_fits_label(
            &mut errors,
            self.metadata.name.as_deref(),
            "controller=<name> of the Foo's pods",
        );
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

/// The Deployment name a Foo (defaulted or not, e.g. a stored old object) asks for.
fn effective_deployment_name(foo: &Foo) -> Option<&str> {
    foo.spec.deployment_name.as_deref().or(foo.metadata.name.as_deref())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::api::FooSpec;

    fn foo(name: Option<&str>, spec: FooSpec) -> Foo {
        Foo {
            metadata: ObjectMeta { name: name.map(str::to_owned), ..Default::default() },
            spec,
            status: None,
        }
    }

    #[test]
    fn defaults_follow_the_sample_controller_and_are_idempotent() {
        let mut object = foo(Some("example-foo"), FooSpec::default());
        object.apply_defaults();
        assert_eq!(object.spec.deployment_name.as_deref(), Some("example-foo"));
        assert_eq!(object.spec.replicas, Some(1));
        let once = object.clone();
        object.apply_defaults();
        assert_eq!(object, once);
    }

    #[test]
    fn defaults_keep_what_the_user_set() {
        let spec = FooSpec { deployment_name: Some("web".into()), replicas: Some(0) };
        let mut object = foo(Some("example-foo"), spec.clone());
        object.apply_defaults();
        assert_eq!(object.spec, spec);
    }

    #[test]
    fn generate_name_objects_leave_the_deployment_name_to_the_reconciler() {
        let mut object = foo(None, FooSpec::default());
        object.apply_defaults();
        assert_eq!(object.spec.deployment_name, None);
        assert_eq!(object.validate(None), Ok(vec![]));
    }

    #[test]
    fn every_error_is_reported_at_once() {
        let object = foo(Some("x"), FooSpec { deployment_name: Some("Bad_Name".into()), replicas: Some(-1) });
        let errors = object.validate(None).unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.deploymentName", "spec.replicas"]);
        let message = errors.message("Foo", "x");
        assert!(
            message.starts_with(
                "The Foo \"x\" is invalid: \n* spec.deploymentName: Invalid value: \"Bad_Name\": "
            )
        );
        assert!(
            message.ends_with("\n* spec.replicas: Invalid value: -1: must be greater than or equal to 0")
        );
    }

    #[test]
    fn a_name_too_long_for_a_label_is_refused_at_metadata_name() {
        let long = "a".repeat(64);
        let object = super::super::defaulted(foo(Some(&long), FooSpec::default()));
        let errors = object.validate(None).unwrap_err();
        assert_eq!(errors.0.len(), 1, "{errors}");
        assert_eq!(errors.0[0].path, "metadata.name");
        assert!(errors.0[0].detail.contains("controller=<name>"), "{errors}");
        let fits = super::super::defaulted(foo(Some(&"a".repeat(63)), FooSpec::default()));
        assert!(fits.validate(None).is_ok());
    }

    #[test]
    fn one_error_reads_like_kubectl() {
        let object = foo(Some("x"), FooSpec { deployment_name: None, replicas: Some(1001) });
        let message = object.validate(None).unwrap_err().message("Foo", "x");
        assert_eq!(
            message,
            "The Foo \"x\" is invalid: spec.replicas: Invalid value: 1001: must be less than or equal to 1000"
        );
    }

    #[test]
    fn scaling_to_zero_and_renaming_warn() {
        let old = foo(Some("x"), FooSpec { deployment_name: Some("a".into()), replicas: Some(1) });
        let new = foo(Some("x"), FooSpec { deployment_name: Some("b".into()), replicas: Some(0) });
        let warnings = new.validate(Some(&old)).unwrap();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("spec.replicas: 0:"));
        assert!(warnings[1].contains("replaces the Deployment: \"b\" is created and \"a\" is deleted"));
        assert_eq!(old.validate(Some(&old)), Ok(vec![]), "an unchanged object has nothing to warn about");
    }
}
