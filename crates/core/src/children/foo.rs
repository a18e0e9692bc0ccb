//! Desired state of a Foo's child (pure): the sample-controller's nginx Deployment.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::labels;
use crate::api::Foo;
use crate::rules::Defaulted;

/// The Deployment a Foo asks for: `spec.deploymentName`, `spec.replicas` nginx pods labelled
/// `app: nginx, controller: <foo>`, controlled by the Foo. Only fields we own are set: this is
/// the server-side apply body. Without a `uid` (a manifest read from a file) the
/// ownerReference is left out; the API server assigns uids.
pub fn desired_deployment(foo: &Defaulted<Foo>, image: &str) -> Deployment {
    let foo_name = foo.name_any();
    let name = foo.effective().deployment_name.clone();
    Deployment {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: foo.namespace(),
            labels: Some(labels::foo_labels(&foo_name)),
            owner_references: foo.controller_owner_ref(&()).map(|owner| vec![owner]),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(foo.effective().replicas),
            selector: LabelSelector {
                match_labels: Some(labels::foo_selector(&foo_name)),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels::foo_labels(&foo_name)),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "nginx".to_owned(),
                        image: Some(image.to_owned()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The `status.selector` of a Foo: its pods' selector, for the scale subresource.
pub fn selector(foo: &Foo) -> String {
    labels::selector_string(&labels::foo_selector(&foo.name_any()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::FooSpec;
    use crate::names::DEFAULT_NGINX_IMAGE;
    use crate::rules::defaulted;

    fn foo() -> Defaulted<Foo> {
        let mut foo =
            Foo::new("example-foo", FooSpec { deployment_name: Some("web".into()), replicas: Some(3) });
        foo.metadata.namespace = Some("ns".into());
        foo.metadata.uid = Some("uid-1".into());
        defaulted(foo)
    }

    #[test]
    fn deployment_matches_the_sample_controller() {
        let deployment = desired_deployment(&foo(), "nginx:1.27.3");
        let value = serde_json::to_value(&deployment).unwrap();
        assert_eq!(value["apiVersion"], "apps/v1");
        assert_eq!(value["kind"], "Deployment");
        assert_eq!(value["metadata"]["name"], "web");
        assert_eq!(value["metadata"]["namespace"], "ns");
        assert_eq!(value["metadata"]["labels"]["app"], "nginx");
        assert_eq!(value["metadata"]["labels"]["controller"], "example-foo");
        assert_eq!(value["metadata"]["labels"]["app.kubernetes.io/managed-by"], "envoy-operator");
        let owner = &value["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Foo");
        assert_eq!(owner["uid"], "uid-1");
        assert_eq!(owner["controller"], true);
        assert_eq!(value["spec"]["replicas"], 3);
        assert_eq!(
            value["spec"]["selector"]["matchLabels"],
            serde_json::json!({"app": "nginx", "controller": "example-foo"})
        );
        assert_eq!(value["spec"]["template"]["metadata"]["labels"]["controller"], "example-foo");
        assert_eq!(value["spec"]["template"]["spec"]["containers"][0]["image"], "nginx:1.27.3");
        assert!(value.get("status").is_none(), "status is not ours to apply");
    }

    #[test]
    fn defaults_fill_name_and_replicas() {
        let foo = defaulted(Foo::new("bare", FooSpec::default()));
        let deployment = desired_deployment(&foo, DEFAULT_NGINX_IMAGE);
        assert_eq!(deployment.metadata.name.as_deref(), Some("bare"));
        assert_eq!(deployment.spec.unwrap().replicas, Some(1));
        assert!(deployment.metadata.owner_references.is_none(), "no uid, no owner");
    }

    #[test]
    fn selector_is_the_pod_selector() {
        assert_eq!(selector(&foo()), "app=nginx,controller=example-foo");
    }
}
