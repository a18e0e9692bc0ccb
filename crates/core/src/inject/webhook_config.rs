//! The webhook registrations for pods (part of the operator's one
//! MutatingWebhookConfiguration, see [`crate::webhook_config`]): two mutating webhooks whose selectors express, in the
//! API server, who is injected, so pods of other namespaces never cost a call.
//!
//! - `namespace.sidecar.example.com`: namespaces labelled `envoy-injection=enabled`, except
//!   pods labelled `sidecar.example.com/inject=false`;
//! - `object.sidecar.example.com`: pods labelled `sidecar.example.com/inject=true` in namespaces
//!   not labelled `enabled` (those are the first webhook's) nor `disabled` (a namespace's opt-out
//!   wins over a pod's opt-in); `NotIn` also matches namespaces without the label.
//!
//! Both exclude the system namespaces and the operator's own by name
//! (`kubernetes.io/metadata.name`, set by the API server on every namespace since 1.21), and
//! the operator's namespace by its label wherever it is renamed.
//! The two are disjoint, so no pod is sent twice.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, RuleWithOperations, WebhookClientConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use super::annotations::{INJECT_LABEL, NAMESPACE_LABEL, NAMESPACE_LABEL_DISABLED, NAMESPACE_LABEL_ENABLED};
use super::config::InjectConfig;
use crate::names::{NAMESPACE_NAME_LABEL, WEBHOOK_TIMEOUT_SECONDS};

/// The two pod webhooks, calling `client_config` (a Service or URL, with its `caBundle`).
///
/// `failurePolicy: Ignore`: a down injector must never block pod creation cluster-wide;
/// the price is that pods created while it is down start without a sidecar.
/// `reinvocationPolicy: IfNeeded`: if a later webhook changes the pod, the injector sees it
/// again, and the status annotation makes that pass a no-op.
pub fn pod_webhooks(client_config: WebhookClientConfig, config: &InjectConfig) -> Vec<MutatingWebhook> {
    let excluded = requirement(NAMESPACE_NAME_LABEL, "NotIn", config.excluded_namespaces());
    let operator = crate::webhook_config::operator_namespace_excluded();
    let enabled = vec![NAMESPACE_LABEL_ENABLED.to_owned()];
    // A namespace labelled `disabled` is never injected, whatever its pods' labels say.
    let enabled_or_disabled = vec![NAMESPACE_LABEL_ENABLED.to_owned(), NAMESPACE_LABEL_DISABLED.to_owned()];
    let webhook = |name: &str, namespace: Vec<LabelSelectorRequirement>, object: LabelSelectorRequirement| {
        MutatingWebhook {
            name: name.to_owned(),
            admission_review_versions: vec!["v1".to_owned()],
            client_config: client_config.clone(),
            rules: Some(vec![RuleWithOperations {
                operations: Some(vec!["CREATE".to_owned()]),
                api_groups: Some(vec![String::new()]),
                api_versions: Some(vec!["v1".to_owned()]),
                resources: Some(vec!["pods".to_owned()]),
                scope: Some("Namespaced".to_owned()),
            }]),
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
            vec![requirement(NAMESPACE_LABEL, "In", enabled), excluded.clone(), operator.clone()],
            requirement(INJECT_LABEL, "NotIn", vec!["false".to_owned()]),
        ),
        webhook(
            "object.sidecar.example.com",
            vec![requirement(NAMESPACE_LABEL, "NotIn", enabled_or_disabled), excluded, operator],
            requirement(INJECT_LABEL, "In", vec!["true".to_owned()]),
        ),
    ]
}

fn requirement(key: &str, operator: &str, values: Vec<String>) -> LabelSelectorRequirement {
    LabelSelectorRequirement { key: key.to_owned(), operator: operator.to_owned(), values: Some(values) }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::admissionregistration::v1::ServiceReference;

    use crate::names::INJECT_PATH;

    use super::*;

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

    /// Which of the two webhooks a namespace with `labels` would send a pod with `pod_labels` to.
    fn called(namespace: &[(&str, &str)], pod: &[(&str, &str)]) -> Vec<String> {
        use kube::core::{Selector, SelectorExt};
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let client = WebhookClientConfig { url: Some("https://x/inject".into()), ..Default::default() };
        pod_webhooks(client, &InjectConfig::default())
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
        assert!(called(&[named("shop")], &[]).is_empty());
        assert!(
            called(&[named("shop"), (NAMESPACE_LABEL, "disabled")], &opt_in).is_empty(),
            "a namespace's opt-out wins over a pod's opt-in"
        );
        assert!(called(&[named("kube-system"), (NAMESPACE_LABEL, "enabled")], &opt_in).is_empty());
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
