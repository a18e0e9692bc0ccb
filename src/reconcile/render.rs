//! `envoy-operator render`: the children the reconcilers would apply for the Foos and
//! Envoys of a manifest, built by the very same builders, as a YAML stream ready for
//! `kubectl diff -f -` or a GitOps repository. Each parent's target status (what the
//! reconciler aims for once the rollout is complete) precedes its children as a YAML
//! comment, so the stream holds only objects that can be applied.
//!
//! Children of a manifest object have no ownerReference: the API server assigns the
//! parent's uid, which a file does not have.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use serde::Serialize;
use serde_json::Value;

use super::{envoy, foo, status};
use crate::admission::{AdmittedKind, parse};
use crate::api::{Envoy, Foo};
use crate::check::display_name;
use crate::manifest::{parse_documents, to_yaml_stream};
use crate::rules::{FieldErrors, Rules};

/// What `render` made of one document.
#[derive(Debug)]
pub enum Outcome {
    /// A valid Foo or Envoy: its children and the status the reconciler aims for.
    Rendered { parent: String, children: Vec<Value>, status: Value },
    /// A Foo or Envoy the rule engine rejects, with the API server's message.
    Rejected { message: String },
    /// Another kind: nothing to render.
    Skipped { note: String },
    /// Not a Kubernetes object.
    Unreadable { message: String },
}

/// One document's outcome with where it came from.
#[derive(Debug)]
pub struct Rendered {
    /// `path (document N, line L)`.
    pub origin: String,
    pub outcome: Outcome,
}

/// Renders every document of one input named `source`.
pub fn render_text(source: &str, text: &str, nginx_image: &str) -> Vec<Rendered> {
    parse_documents(text)
        .into_iter()
        .map(|document| Rendered {
            origin: format!("{source} (document {}, line {})", document.index, document.line),
            outcome: match document.content {
                Ok(object) => render_object(&object, nginx_image),
                Err(message) => Outcome::Unreadable { message: format!("not valid YAML or JSON: {message}") },
            },
        })
        .collect()
}

/// Renders one object.
pub fn render_object(object: &Value, nginx_image: &str) -> Outcome {
    let field = |name: &str| object.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Outcome::Unreadable {
            message: "not a Kubernetes object: `apiVersion` and `kind` must be set".to_owned(),
        };
    };
    match AdmittedKind::from_type_meta(api_version, kind) {
        Some(AdmittedKind::Foo) => typed::<Foo>(object, |foo| render_foo(foo, nginx_image)),
        Some(AdmittedKind::Envoy) => typed::<Envoy>(object, render_envoy),
        None => Outcome::Skipped { note: format!("{api_version} {kind} has no children to render") },
    }
}

fn typed<K>(object: &Value, render: impl FnOnce(&K) -> Result<Outcome, serde_json::Error>) -> Outcome
where
    K: Rules + kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned,
{
    let rejected = |errors: FieldErrors| Outcome::Rejected {
        message: errors.message(&K::kind(&()), &display_name(object)),
    };
    let mut parsed: K = match parse(object) {
        Ok(parsed) => parsed,
        Err(error) => return rejected(vec![*error].into()),
    };
    parsed.apply_defaults();
    if let Err(errors) = parsed.validate(None) {
        return rejected(errors);
    }
    render(&parsed).unwrap_or_else(|error| Outcome::Unreadable { message: format!("serializing: {error}") })
}

fn json(value: &impl Serialize) -> Result<Value, serde_json::Error> {
    serde_json::to_value(value)
}

/// A Deployment as it looks once every replica is updated and available.
fn rolled_out(deployment: &Deployment) -> Deployment {
    let desired = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
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

fn render_foo(foo: &Foo, nginx_image: &str) -> Result<Outcome, serde_json::Error> {
    let deployment = foo::desired_deployment(foo, nginx_image);
    let status =
        status::foo_status(foo, foo::selector(foo), Some(&rolled_out(&deployment)), None, &status::now());
    Ok(Outcome::Rendered {
        parent: format!("Foo {}", display_name(&json(foo)?)),
        children: vec![json(&deployment)?],
        status: without_times(json(&status)?),
    })
}

fn render_envoy(envoy: &Envoy) -> Result<Outcome, serde_json::Error> {
    let children = envoy::desired_children(envoy);
    let status = status::envoy_status(
        envoy,
        envoy::selector(envoy),
        Some(&rolled_out(&children.deployment)),
        Some(children.config_hash.clone()),
        None,
        &status::now(),
    );
    Ok(Outcome::Rendered {
        parent: format!("Envoy {}", display_name(&json(envoy)?)),
        children: vec![json(&children.config_map)?, json(&children.deployment)?, json(&children.service)?],
        status: without_times(json(&status)?),
    })
}

/// The YAML stream of every rendered child, each parent's target status as a comment
/// before its children.
pub fn to_stream<'a>(rendered: impl IntoIterator<Item = &'a Rendered>) -> crate::Result<String> {
    let mut documents = Vec::new();
    for item in rendered {
        let Outcome::Rendered { parent, children, status } = &item.outcome else { continue };
        let mut comment = format!("# {parent}: the status the reconciler aims for once rolled out:\n");
        for line in to_yaml_stream([status])?.lines() {
            comment.push_str(&format!("#   {line}\n"));
        }
        for (i, child) in children.iter().enumerate() {
            let yaml = to_yaml_stream([child])?;
            documents.push(if i == 0 { format!("{comment}{yaml}") } else { yaml });
        }
    }
    Ok(documents.join("---\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOO: &str = include_str!("../../examples/foo.yaml");
    const ENVOY: &str = include_str!("../../examples/envoy.yaml");

    fn rendered(text: &str) -> (Vec<Value>, Value) {
        let mut out = render_text("example", text, foo::DEFAULT_NGINX_IMAGE);
        assert_eq!(out.len(), 1);
        match out.remove(0).outcome {
            Outcome::Rendered { children, status, .. } => (children, status),
            other => panic!("not rendered: {other:?}"),
        }
    }

    #[test]
    fn example_foo_renders_its_deployment_and_a_ready_status() {
        let (children, status) = rendered(FOO);
        assert_eq!(children.len(), 1);
        assert_eq!(children[0]["kind"], "Deployment");
        assert_eq!(children[0]["metadata"]["name"], "example-foo");
        assert_eq!(children[0]["spec"]["replicas"], 1);
        assert_eq!(
            children[0]["spec"]["template"]["spec"]["containers"][0]["image"],
            foo::DEFAULT_NGINX_IMAGE
        );
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
        assert_eq!(status["readyReplicas"], 3);
        assert_eq!(
            status["configHash"],
            children[1]["spec"]["template"]["metadata"]["annotations"]["envoy-operator.example.com/config-hash"]
        );
    }

    #[test]
    fn invalid_and_foreign_documents_are_reported() {
        let text = "apiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\nmetadata: {name: bad}\nspec: {replicas: -1}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
        let out = render_text("x", text, foo::DEFAULT_NGINX_IMAGE);
        assert!(
            matches!(&out[0].outcome, Outcome::Rejected { message } if message.contains("spec.replicas"))
        );
        assert!(matches!(&out[1].outcome, Outcome::Skipped { .. }));
    }

    #[test]
    fn the_stream_parses_back_to_the_children() {
        let out = render_text("example", &format!("{FOO}\n---\n{ENVOY}"), foo::DEFAULT_NGINX_IMAGE);
        let stream = to_stream(&out).unwrap();
        assert!(stream.starts_with("# Foo example-foo: the status"));
        let documents = parse_documents(&stream);
        assert_eq!(documents.len(), 4);
        assert!(documents.iter().all(|d| d.content.as_ref().is_ok_and(|v| v["kind"].is_string())));
    }
}
