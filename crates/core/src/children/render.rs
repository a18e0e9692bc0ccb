//! What `envoy-operator render` prints for one object: the children the reconcilers would
//! apply, built by the very same builders, for `kubectl diff -f -` or a GitOps repository. The
//! parent's target status (what the reconciler aims for once the rollout is complete) is the
//! comment before its children, so the stream holds only objects that can be applied.
//!
//! Children of a manifest object have no ownerReference: the API server assigns the
//! parent's uid, which a file does not have.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use serde::Serialize;
use serde_json::Value;

use super::envoy::ControlPlaneTrust;
use super::{envoy, foo, status};
use crate::admission::{Admitted, defaulted_valid};
use crate::api::{Envoy, Foo};
use crate::kind::AdmittedKind;
use crate::manifest::{Outcome, display_name, to_yaml, type_meta};
use crate::rules::{Defaulted, FieldErrors};

/// A parent's children and the status the reconciler aims for once they are rolled out.
#[derive(Debug, PartialEq)]
pub struct Children {
    /// `Kind name` of the parent.
    pub parent: String,
    pub children: Vec<Value>,
    pub status: Value,
}

impl Children {
    /// The children in the parent's place, the target status as the comment before them.
    pub fn into_outcome(self) -> Outcome {
        let mut comment = format!("{}: the status the reconciler aims for once rolled out:\n", self.parent);
        match to_yaml(&self.status) {
            Ok(yaml) => yaml.lines().for_each(|line| comment.push_str(&format!("  {line}\n"))),
            Err(error) => return Outcome::Unreadable { message: error.to_string() },
        }
        Outcome::Rendered { comment, objects: self.children }
    }
}

/// What the reconcilers are run with, as far as their children depend on it.
#[derive(Clone, Copy, Debug)]
pub struct Settings<'a> {
    /// Image of a Foo's nginx pods.
    pub nginx_image: &'a str,
    /// The operator's control plane, for Envoys without `spec.xds`.
    pub control_plane: Option<&'a ControlPlaneTrust>,
}

/// Renders one object: its children, or why there are none.
pub fn render_object(object: &Value, settings: &Settings<'_>) -> Outcome {
    render(object, settings).map_or_else(|outcome| outcome, Children::into_outcome)
}

/// The children of a Foo or Envoy; other kinds, invalid and unreadable objects are `Err`
/// with the outcome to report.
pub fn render(object: &Value, settings: &Settings<'_>) -> Result<Children, Outcome> {
    let (api_version, kind) = type_meta(object)?;
    match AdmittedKind::resolve(api_version, kind).map_err(|message| Outcome::Rejected { message })? {
        Some(AdmittedKind::Foo) => typed::<Foo>(object, |foo| render_foo(foo, settings.nginx_image)),
        Some(AdmittedKind::Envoy) => {
            typed::<Envoy>(object, |envoy| render_envoy(envoy, settings.control_plane))
        }
        Some(AdmittedKind::EnvoyRoute) => Err(Outcome::Skipped {
            note: format!("{api_version} {kind} has no children: the xDS server serves it to its Envoys"),
        }),
        None => Err(Outcome::Skipped { note: format!("{api_version} {kind} has no children to render") }),
    }
}

fn typed<K>(
    object: &Value,
    render: impl FnOnce(&Defaulted<K>) -> Result<Children, String>,
) -> Result<Children, Outcome>
where
    K: Admitted + kube::Resource<DynamicType = ()>,
{
    let rejected = |errors: FieldErrors| Outcome::Rejected {
        message: errors.message(&K::kind(&()), &display_name(object)),
    };
    crate::strict::check(object)?;
    let (parsed, _warnings) = defaulted_valid::<K>(object).map_err(rejected)?;
    if parsed.meta().name.is_none() {
        return Err(Outcome::Rejected {
            message: format!(
                "{} {}: render needs metadata.name: the children are named after it",
                K::kind(&()),
                display_name(object)
            ),
        });
    }
    render(&parsed).map_err(|error| Outcome::Unreadable { message: format!("serializing: {error}") })
}

fn json(value: &impl Serialize) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

/// A Deployment as it looks once all `desired` replicas are updated and available.
fn rolled_out(deployment: &Deployment, desired: i32) -> Deployment {
    Deployment {
        status: Some(DeploymentStatus {
            replicas: Some(desired),
            updated_replicas: Some(desired),
            ready_replicas: Some(desired),
            available_replicas: Some(desired),
            ..Default::default()
        }),
        ..deployment.clone()
    }
}

/// Drops what depends on when render runs, so its output is stable.
fn without_times(mut status: Value) -> Value {
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions {
            if let Some(fields) = condition.as_object_mut() {
                fields.remove("lastTransitionTime");
            }
        }
    }
    status
}

fn render_foo(foo: &Defaulted<Foo>, nginx_image: &str) -> Result<Children, String> {
    let deployment = foo::desired_deployment(foo, nginx_image);
    let rolled_out = rolled_out(&deployment, foo.effective().replicas);
    let status = status::foo_status(foo, foo::selector(foo), Some(&rolled_out), None, &status::now());
    Ok(Children {
        parent: format!("Foo {}", display_name(&json(&**foo)?)),
        children: vec![json(&deployment)?],
        status: without_times(json(&status)?),
    })
}

fn render_envoy(
    envoy: &Defaulted<Envoy>,
    control_plane: Option<&ControlPlaneTrust>,
) -> Result<Children, String> {
    let children = envoy::desired_children(envoy, control_plane);
    let rolled_out = rolled_out(&children.deployment, envoy.effective().replicas);
    let status = status::envoy_status(
        envoy,
        envoy::selector(envoy),
        Some(&rolled_out),
        Some(children.config_hash.clone()),
        None,
        &status::now(),
    );
    let mut objects = vec![json(&children.config_map)?];
    if let Some(ca) = &children.ca_config_map {
        objects.push(json(ca)?);
    }
    objects.extend([json(&children.deployment)?, json(&children.service)?]);
    Ok(Children {
        parent: format!("Envoy {}", display_name(&json(&**envoy)?)),
        children: objects,
        status: without_times(json(&status)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::parse_documents;
    use crate::names::DEFAULT_NGINX_IMAGE;

    const SETTINGS: Settings<'static> = Settings { nginx_image: DEFAULT_NGINX_IMAGE, control_plane: None };

    const FOO: &str = include_str!("../../../../examples/foo.yaml");
    const ENVOY: &str = include_str!("../../../../examples/envoy.yaml");

    fn objects(text: &str) -> Vec<Value> {
        parse_documents(text).into_iter().map(|document| document.content.unwrap()).collect()
    }

    fn rendered(text: &str) -> (Vec<Value>, Value) {
        let objects = objects(text);
        assert_eq!(objects.len(), 1);
        match render(&objects[0], &SETTINGS) {
            Ok(Children { children, status, .. }) => (children, status),
            Err(other) => panic!("not rendered: {other:?}"),
        }
    }

    #[test]
    fn example_foo_renders_its_deployment_and_a_ready_status() {
        let (children, status) = rendered(FOO);
        assert_eq!(children.len(), 1);
        assert_eq!(children[0]["kind"], "Deployment");
        assert_eq!(children[0]["metadata"]["name"], "example-foo");
        assert_eq!(children[0]["spec"]["replicas"], 1);
        assert_eq!(children[0]["spec"]["template"]["spec"]["containers"][0]["image"], DEFAULT_NGINX_IMAGE);
        assert_eq!(status["availableReplicas"], 1);
        let ready = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "True");
        assert!(ready.get("lastTransitionTime").is_none());
    }

    #[test]
    fn example_envoy_renders_config_map_deployment_and_service() {
        let (children, status) = rendered(ENVOY);
        let kinds: Vec<&str> = children.iter().map(|c| c["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Deployment", "Service"]);
        assert_eq!(children[0]["metadata"]["name"], "envoy-cfg-1");
        assert_eq!(children[1]["metadata"]["name"], "webserver-beta");
        assert_eq!(children[2]["metadata"]["name"], "webserver-beta");
        assert_eq!(status["readyReplicas"], 2);
        assert_eq!(
            status["configHash"],
            children[1]["spec"]["template"]["metadata"]["annotations"]["envoy-operator.example.com/config-hash"]
        );
    }

    #[test]
    fn invalid_and_foreign_documents_are_reported() {
        let text = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: bad}\nspec: {replicas: -1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
        let out: Vec<Outcome> = objects(text).iter().map(|o| render_object(o, &SETTINGS)).collect();
        assert!(matches!(&out[0], Outcome::Rejected { message } if message.contains("spec.replicas")));
        assert!(matches!(&out[1], Outcome::Skipped { .. }));
    }

    #[test]
    fn the_target_status_is_the_comment_before_the_children() {
        let Outcome::Rendered { comment, objects } = render_object(&self::objects(FOO)[0], &SETTINGS) else {
            panic!("not rendered");
        };
        assert!(
            comment.starts_with("Foo example-foo: the status the reconciler aims for once rolled out:\n  ")
        );
        assert!(comment.contains("  availableReplicas: 1\n"), "{comment}");
        assert_eq!(objects.len(), 1);
    }
}
