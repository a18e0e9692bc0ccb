//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that register the
//! webhook with the API server, generated from the code so the paths, kinds and versions can
//! never drift from what the server serves. Cluster mode is committed under
//! `webhook-config/` and checked by a test.
//!
//! Composable: each configuration is a list of webhooks ([`mutating_webhooks`],
//! [`validating_webhooks`]); another admission handler adds its own entries built with the
//! same [`WebhookTarget::client_config`], as the pod injector does.
//!
//! The pod injector's two webhooks ([`pod_webhooks`]) express, in the API server, who is
//! injected, so pods of other namespaces never cost a call:
//!
//! - `namespace.sidecar.example.com`: namespaces labelled `envoy-injection=enabled`, except
//!   pods labelled `sidecar.example.com/inject=false`;
//! - `object.sidecar.example.com`: pods labelled `sidecar.example.com/inject=true` in namespaces
//!   not labelled `enabled` (those are the first webhook's) nor `disabled` (a namespace's opt-out
//!   wins over a pod's opt-in); `NotIn` also matches namespaces without the label.
//!
//! - `annotation.sidecar.example.com` (`POST /inject_annotation`, never a patch): pods not
//!   labelled `sidecar.example.com/inject` but annotated `sidecar.example.com/inject: "true"`
//!   in the second webhook's namespaces, picked by a `matchCondition` (CEL over the pod's
//!   annotations, which no selector reads). The label is what opts in; the answer is an
//!   admission warning saying so, which `kubectl` prints.
//!
//! All three exclude the system namespaces and the operator's own by name
//! (`kubernetes.io/metadata.name`, set by the API server on every namespace since 1.21), and
//! the operator's namespace by its label wherever it is renamed.
//! The three are disjoint, so no pod is sent twice.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};

use crate::inject::InjectConfig;
use crate::inject::annotations::{
    INJECT_LABEL, NAMESPACE_LABEL, NAMESPACE_LABEL_DISABLED, NAMESPACE_LABEL_ENABLED,
};
use crate::kind::AdmittedKind;
use crate::manifest::{YamlError, to_yaml};
use crate::names::{
    INJECT_ANNOTATION_PATH, INJECT_PATH, MUTATE_PATH, NAMESPACE_NAME_LABEL, OPERATOR_NAMESPACE,
    OPERATOR_NAMESPACE_LABEL, VALIDATE_PATH, WEBHOOK_CONFIGURATION, WEBHOOK_SERVICE, WEBHOOK_SERVICE_PORT,
    WEBHOOK_TIMEOUT_SECONDS,
};

/// File names under `webhook-config/`.
pub const MUTATING_FILE: &str = "mutating-webhook-configuration.yaml";
pub const VALIDATING_FILE: &str = "validating-webhook-configuration.yaml";

/// Where the API server reaches the webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookTarget {
    /// In the cluster, through a Service. The caBundle is left out: the operator patches it
    /// in from its certificate at startup.
    Service { namespace: String, name: String, port: i32 },
    /// Anywhere by URL (e.g. `https://127.0.0.1:8443` for a local run), trusting `ca_bundle`.
    Url { base: String, ca_bundle: Vec<u8> },
}

impl WebhookTarget {
    /// The client configuration for the endpoint at `path`.
    pub fn client_config(&self, path: &str) -> WebhookClientConfig {
        match self {
            Self::Service { namespace, name, port } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_owned()),
                    port: Some(*port),
                }),
                ..WebhookClientConfig::default()
            },
            Self::Url { base, ca_bundle } => WebhookClientConfig {
                url: Some(format!("{}{path}", base.trim_end_matches('/'))),
                ca_bundle: Some(ByteString(ca_bundle.clone())),
                ..WebhookClientConfig::default()
            },
        }
    }
}

/// What the configurations are generated from.
#[derive(Clone, Debug)]
pub struct WebhookOptions {
    pub target: WebhookTarget,
    /// The operator's own namespace, never sent to the webhook (so a broken webhook cannot
    /// block repairing the operator itself).
    pub operator_namespace: String,
}

impl Default for WebhookOptions {
    /// The in-cluster install of `deploy/`: the webhook Service in the operator's namespace.
    fn default() -> Self {
        Self {
            target: WebhookTarget::Service {
                namespace: OPERATOR_NAMESPACE.to_owned(),
                name: WEBHOOK_SERVICE.to_owned(),
                port: WEBHOOK_SERVICE_PORT,
            },
            operator_namespace: OPERATOR_NAMESPACE.to_owned(),
        }
    }
}

/// The fully qualified webhook name for a kind, e.g. `foos.samplecontroller.k8s.io`; it is
/// what `kubectl` shows in "admission webhook … denied the request".
pub fn webhook_name(kind: AdmittedKind) -> String {
    format!("{}.{}", kind.plural(), kind.group())
}

fn rules(kind: AdmittedKind) -> Vec<RuleWithOperations> {
    let version = kind.api_version().rsplit('/').next().unwrap_or_default().to_owned();
    vec![RuleWithOperations {
        api_groups: Some(vec![kind.group().into_owned()]),
        api_versions: Some(vec![version]),
        operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
        resources: Some(vec![kind.plural().into_owned()]),
        scope: Some("Namespaced".to_owned()),
    }]
}

/// Every namespace but the operator's: excluded by name, and by its label wherever it is
/// renamed (see [`operator_namespace_excluded`]).
pub fn namespace_selector(operator_namespace: &str) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![
            LabelSelectorRequirement {
                key: NAMESPACE_NAME_LABEL.to_owned(),
                operator: "NotIn".to_owned(),
                values: Some(vec![operator_namespace.to_owned()]),
            },
            operator_namespace_excluded(),
        ]),
        match_labels: None,
    }
}

/// Leaves out the namespace labelled as the operator's ([`OPERATOR_NAMESPACE_LABEL`]).
pub fn operator_namespace_excluded() -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: OPERATOR_NAMESPACE_LABEL.to_owned(),
        operator: "DoesNotExist".to_owned(),
        values: None,
    }
}

/// The mutating webhooks: defaults for Foo, Envoy and EnvoyRoute (`POST /mutate`), then the sidecar
/// injector for pods (`POST /inject`, `failurePolicy: Ignore`).
pub fn mutating_webhooks(options: &WebhookOptions) -> Vec<MutatingWebhook> {
    let injector =
        InjectConfig { operator_namespace: options.operator_namespace.clone(), ..InjectConfig::default() };
    let mut webhooks = defaulting_webhooks(options);
    webhooks.extend(pod_webhooks(options.target.client_config(INJECT_PATH), &injector));
    webhooks.push(opt_in_annotation_webhook(options.target.client_config(INJECT_ANNOTATION_PATH), &injector));
    webhooks
}

/// The two pod webhooks, calling `client_config` (a Service or URL, with its `caBundle`).
///
/// `failurePolicy: Ignore`: a down injector must never block pod creation cluster-wide;
/// the price is that pods created while it is down start without a sidecar.
/// `reinvocationPolicy: IfNeeded`: if a later webhook changes the pod, the injector sees it
/// again, and the status annotation makes that pass a no-op.
pub fn pod_webhooks(client_config: WebhookClientConfig, config: &InjectConfig) -> Vec<MutatingWebhook> {
    let excluded = requirement(NAMESPACE_NAME_LABEL, "NotIn", config.excluded_namespaces());
    let operator = operator_namespace_excluded();
    let enabled = vec![NAMESPACE_LABEL_ENABLED.to_owned()];
    let webhook = |name: &str, namespace: Vec<LabelSelectorRequirement>, object: LabelSelectorRequirement| {
        MutatingWebhook {
            name: name.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: client_config.clone(),
            rules: pod_creation(),
            failure_policy: Some("Ignore".to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            reinvocation_policy: Some("IfNeeded".to_owned()),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(WEBHOOK_TIMEOUT_SECONDS),
            namespace_selector: Some(LabelSelector {
                match_expressions: Some(namespace),
                match_labels: None,
            }),
            object_selector: Some(LabelSelector {
                match_expressions: Some(vec![object]),
                match_labels: None,
            }),
            match_conditions: None,
        }
    };
    vec![
        webhook(
            "namespace.sidecar.example.com",
            vec![requirement(NAMESPACE_LABEL, "In", enabled), excluded, operator],
            requirement(INJECT_LABEL, "NotIn", vec!["false".to_owned()]),
        ),
        webhook(
            "object.sidecar.example.com",
            unlabelled_namespaces(config),
            requirement(INJECT_LABEL, "In", vec!["true".to_owned()]),
        ),
    ]
}

/// Pod creations, which the pod webhooks see.
fn pod_creation() -> Option<Vec<RuleWithOperations>> {
    Some(vec![RuleWithOperations {
        operations: Some(vec!["CREATE".to_owned()]),
        api_groups: Some(vec![String::new()]),
        api_versions: Some(vec!["v1".to_owned()]),
        resources: Some(vec!["pods".to_owned()]),
        scope: Some("Namespaced".to_owned()),
    }])
}

/// The namespaces where a pod opts in by its own label: neither labelled for injection nor
/// labelled `disabled` (never injected, whatever its pods' labels say), nor excluded.
fn unlabelled_namespaces(config: &InjectConfig) -> Vec<LabelSelectorRequirement> {
    vec![
        requirement(
            NAMESPACE_LABEL,
            "NotIn",
            vec![NAMESPACE_LABEL_ENABLED.to_owned(), NAMESPACE_LABEL_DISABLED.to_owned()],
        ),
        requirement(NAMESPACE_NAME_LABEL, "NotIn", config.excluded_namespaces()),
        operator_namespace_excluded(),
    ]
}

/// The webhook that warns pods opting in with an annotation (see the module's documentation):
/// where the second pod webhook looks, for pods without the label whose annotation says
/// `"true"`. `matchConditions` are on by default from Kubernetes 1.28 (beta, GA in 1.30), the
/// operator's minimum; an API server that ignored them would send every unlabelled pod of
/// those namespaces, which the endpoint allows untouched unless the annotation is there.
pub fn opt_in_annotation_webhook(
    client_config: WebhookClientConfig,
    config: &InjectConfig,
) -> MutatingWebhook {
    let namespaces = unlabelled_namespaces(config);
    let unlabelled = LabelSelectorRequirement {
        key: INJECT_LABEL.to_owned(),
        operator: "DoesNotExist".to_owned(),
        values: None,
    };
    MutatingWebhook {
        name: "annotation.sidecar.example.com".to_owned(),
        admission_review_versions: vec!["v1".to_owned()],
        client_config,
        rules: pod_creation(),
        // A warning is never worth blocking a pod for.
        failure_policy: Some("Ignore".to_owned()),
        match_policy: Some("Equivalent".to_owned()),
        // It never patches, so nothing it does calls for a second look.
        reinvocation_policy: Some("Never".to_owned()),
        side_effects: "None".to_owned(),
        timeout_seconds: Some(WEBHOOK_TIMEOUT_SECONDS),
        namespace_selector: Some(LabelSelector { match_expressions: Some(namespaces), match_labels: None }),
        object_selector: Some(LabelSelector {
            match_expressions: Some(vec![unlabelled]),
            match_labels: None,
        }),
        match_conditions: Some(vec![MatchCondition {
            name: "opts-in-with-an-annotation".to_owned(),
            expression: format!(
                "has(object.metadata.annotations) && '{INJECT_LABEL}' in object.metadata.annotations && object.metadata.annotations['{INJECT_LABEL}'] == 'true'"
            ),
        }]),
    }
}

fn requirement(key: &str, operator: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement { key: key.to_owned(), operator: operator.to_owned(), values: Some(values) }
}

/// The defaulting webhooks for Foo, Envoy and EnvoyRoute (`POST /mutate`).
fn defaulting_webhooks(options: &WebhookOptions) -> Vec<MutatingWebhook> {
    AdmittedKind::ALL
        .into_iter()
        .map(|kind| MutatingWebhook {
            name: webhook_name(kind),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: options.target.client_config(MUTATE_PATH),
            rules: Some(rules(kind)),
            // Our own kinds: without the webhook they would be stored undefaulted. The CRD
            // schema still checks the basics if it is down, but Fail keeps objects uniform.
            failure_policy: Some("Fail".to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            namespace_selector: Some(namespace_selector(&options.operator_namespace)),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(WEBHOOK_TIMEOUT_SECONDS),
            // Defaults only fill what is absent, so a second call after another webhook's
            // change is safe and cheap.
            reinvocation_policy: Some("IfNeeded".to_owned()),
            ..MutatingWebhook::default()
        })
        .collect()
}

/// The validating webhooks for Foo, Envoy and EnvoyRoute (`POST /validate`).
pub fn validating_webhooks(options: &WebhookOptions) -> Vec<ValidatingWebhook> {
    AdmittedKind::ALL
        .into_iter()
        .map(|kind| ValidatingWebhook {
            name: webhook_name(kind),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: options.target.client_config(VALIDATE_PATH),
            rules: Some(rules(kind)),
            failure_policy: Some("Fail".to_owned()),
            match_policy: Some("Equivalent".to_owned()),
            namespace_selector: Some(namespace_selector(&options.operator_namespace)),
            side_effects: "None".to_owned(),
            timeout_seconds: Some(WEBHOOK_TIMEOUT_SECONDS),
            ..ValidatingWebhook::default()
        })
        .collect()
}

fn metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(WEBHOOK_CONFIGURATION.to_owned()),
        labels: Some(BTreeMap::from([
            ("app.kubernetes.io/name".to_owned(), "envoy-operator".to_owned()),
            ("app.kubernetes.io/component".to_owned(), "webhook".to_owned()),
        ])),
        ..ObjectMeta::default()
    }
}

pub fn mutating_configuration(webhooks: Vec<MutatingWebhook>) -> MutatingWebhookConfiguration {
    MutatingWebhookConfiguration { metadata: metadata(), webhooks: Some(webhooks) }
}

pub fn validating_configuration(webhooks: Vec<ValidatingWebhook>) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration { metadata: metadata(), webhooks: Some(webhooks) }
}

/// Both configurations for Foo, Envoy and EnvoyRoute, as `(file name, YAML)`.
pub fn render(options: &WebhookOptions) -> Result<Vec<(&'static str, String)>, YamlError> {
    let header = match &options.target {
        WebhookTarget::Service { .. } => {
            "# Generated by `envoy-operator webhook-config --out webhook-config/` from crates/core/src/webhook_config.rs. Do not edit.\n\
             # caBundle is patched in by the operator from its serving certificate's CA.\n"
        }
        WebhookTarget::Url { .. } => {
            "# Generated by `envoy-operator webhook-config --mode local` for a webhook run outside the cluster.\n"
        }
    };
    Ok(vec![
        (MUTATING_FILE, format!("{header}{}", to_yaml(&mutating_configuration(mutating_webhooks(options)))?)),
        (
            VALIDATING_FILE,
            format!("{header}{}", to_yaml(&validating_configuration(validating_webhooks(options)))?),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> WebhookOptions {
        WebhookOptions::default()
    }

    #[test]
    fn one_webhook_per_kind_with_the_served_paths() {
        let mutating = mutating_webhooks(&cluster());
        let names: Vec<&str> = mutating.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "foos.samplecontroller.k8s.io",
                "envoys.example.com",
                "envoyroutes.example.com",
                "namespace.sidecar.example.com",
                "object.sidecar.example.com",
                "annotation.sidecar.example.com"
            ]
        );
        let service = mutating[0].client_config.service.as_ref().unwrap();
        assert_eq!(service.path.as_deref(), Some("/mutate"));
        assert_eq!(service.port, Some(443));
        let rule = &mutating[1].rules.as_ref().unwrap()[0];
        assert_eq!(rule.api_groups, Some(vec!["example.com".to_owned()]));
        assert_eq!(rule.api_versions, Some(vec!["v1".to_owned()]));
        assert_eq!(rule.resources, Some(vec!["envoys".to_owned()]));
        let route_rule = &mutating[2].rules.as_ref().unwrap()[0];
        assert_eq!(route_rule.resources, Some(vec!["envoyroutes".to_owned()]));
        assert_eq!(route_rule.operations, Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]));
        for pods in &mutating[3..5] {
            assert_eq!(pods.client_config.service.as_ref().unwrap().path.as_deref(), Some("/inject"));
            assert_eq!(pods.failure_policy.as_deref(), Some("Ignore"), "a down injector never blocks pods");
        }
        assert_eq!(
            mutating[5].client_config.service.as_ref().unwrap().path.as_deref(),
            Some("/inject_annotation")
        );
        assert_eq!(mutating[5].failure_policy.as_deref(), Some("Ignore"));
        assert!(mutating[..3].iter().all(|w| w.failure_policy.as_deref() == Some("Fail")));
        let validating = validating_webhooks(&cluster());
        let names: Vec<&str> = validating.iter().map(|w| w.name.as_str()).collect();
        assert_eq!(names, ["foos.samplecontroller.k8s.io", "envoys.example.com", "envoyroutes.example.com"]);
        assert_eq!(validating[0].client_config.service.as_ref().unwrap().path.as_deref(), Some("/validate"));
        assert!(validating.iter().all(|w| w.client_config.ca_bundle.is_none()));
    }

    #[test]
    fn local_mode_uses_a_url_and_the_ca_bundle() {
        let options = WebhookOptions {
            target: WebhookTarget::Url { base: "https://127.0.0.1:8443/".into(), ca_bundle: b"PEM".to_vec() },
            operator_namespace: "envoy-operator".into(),
        };
        let webhook = &validating_webhooks(&options)[0];
        assert_eq!(webhook.client_config.url.as_deref(), Some("https://127.0.0.1:8443/validate"));
        assert_eq!(webhook.client_config.ca_bundle, Some(ByteString(b"PEM".to_vec())));
        assert!(webhook.client_config.service.is_none());
    }

    #[test]
    fn two_disjoint_webhooks_for_pod_creation() {
        let client = WebhookClientConfig {
            service: Some(ServiceReference {
                name: "envoy-operator".to_owned(),
                namespace: "envoy-operator".to_owned(),
                path: Some(INJECT_PATH.to_owned()),
                port: Some(443),
            }),
            ..Default::default()
        };
        let webhooks = pod_webhooks(client, &InjectConfig::default());
        assert_eq!(webhooks.len(), 2);
        for webhook in &webhooks {
            assert_eq!(webhook.failure_policy.as_deref(), Some("Ignore"));
            assert_eq!(webhook.reinvocation_policy.as_deref(), Some("IfNeeded"));
            let rule = &webhook.rules.as_ref().unwrap()[0];
            assert_eq!(rule.operations.as_deref(), Some(&["CREATE".to_owned()][..]));
            assert_eq!(rule.resources.as_deref(), Some(&["pods".to_owned()][..]));
            let namespace = webhook.namespace_selector.as_ref().unwrap().match_expressions.as_ref().unwrap();
            let excluded = namespace.iter().find(|r| r.key == NAMESPACE_NAME_LABEL).unwrap();
            assert_eq!(excluded.operator, "NotIn");
            assert!(excluded.values.as_ref().unwrap().contains(&"kube-system".to_owned()));
            assert!(excluded.values.as_ref().unwrap().contains(&"envoy-operator".to_owned()));
        }
        let selector = |i: usize| {
            let expressions =
                webhooks[i].namespace_selector.as_ref().unwrap().match_expressions.as_ref().unwrap();
            expressions.iter().find(|r| r.key == NAMESPACE_LABEL).unwrap().operator.clone()
        };
        assert_eq!((selector(0), selector(1)), ("In".to_owned(), "NotIn".to_owned()));
    }

    /// Which of the pod webhooks a namespace with `labels` would send a pod with `pod_labels`
    /// to, by their selectors (the annotation webhook's `matchConditions` aside).
    fn called(namespace: &[(&str, &str)], pod: &[(&str, &str)]) -> Vec<String> {
        use kube::core::{Selector, SelectorExt};
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let client = WebhookClientConfig { url: Some("https://x/inject".into()), ..Default::default() };
        let config = InjectConfig::default();
        let mut webhooks = pod_webhooks(client.clone(), &config);
        webhooks.push(opt_in_annotation_webhook(client, &config));
        webhooks
            .into_iter()
            .filter(|w| {
                let namespace_selector = Selector::try_from(w.namespace_selector.clone().unwrap()).unwrap();
                let object_selector = Selector::try_from(w.object_selector.clone().unwrap()).unwrap();
                namespace_selector.matches(&map(namespace)) && object_selector.matches(&map(pod))
            })
            .map(|w| w.name)
            .collect()
    }

    #[test]
    fn who_is_sent_to_the_injector() {
        let named = |name: &'static str| (NAMESPACE_NAME_LABEL, name);
        let opt_in = [(INJECT_LABEL, "true")];
        assert_eq!(
            called(&[named("shop"), (NAMESPACE_LABEL, "enabled")], &[]),
            ["namespace.sidecar.example.com"]
        );
        assert_eq!(called(&[named("shop")], &opt_in), ["object.sidecar.example.com"]);
        // Where only the label opts in, pods without it are the annotation webhook's (which
        // its matchCondition narrows to those annotated to opt in).
        assert_eq!(called(&[named("shop")], &[]), ["annotation.sidecar.example.com"]);
        assert!(called(&[named("shop")], &[(INJECT_LABEL, "false")]).is_empty());
        for pod in [&opt_in[..], &[]] {
            assert!(
                called(&[named("shop"), (NAMESPACE_LABEL, "disabled")], pod).is_empty(),
                "a namespace's opt-out wins over a pod's opt-in"
            );
        }
        assert!(called(&[named("kube-system"), (NAMESPACE_LABEL, "enabled")], &opt_in).is_empty());
        assert!(called(&[named("kube-system")], &[]).is_empty());
        let renamed_operator_namespace = [
            named("platform-ops"),
            (crate::names::OPERATOR_NAMESPACE_LABEL, "true"),
            (NAMESPACE_LABEL, "enabled"),
        ];
        assert!(
            called(&renamed_operator_namespace, &opt_in).is_empty(),
            "the operator's namespace, by its label"
        );
    }
}
