//! Label selectors (`allowedRoutes.namespaces.selector`), as Kubernetes reads them: every
//! `matchLabels` pair and every `matchExpressions` requirement must hold; an empty selector
//! selects everything.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `selector` selects an object with `labels`. An unknown operator selects nothing.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value));
    let expressions = selector.match_expressions.iter().flatten().all(|requirement| {
        let value = labels.get(&requirement.key);
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    pairs && expressions
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn pairs_and_expressions_must_all_hold() {
        let team = labels(&[("team", "shop"), ("env", "prod")]);
        assert!(selects(&LabelSelector::default(), &team), "the empty selector selects everything");
        let by_label =
            LabelSelector { match_labels: Some(labels(&[("team", "shop")])), ..Default::default() };
        assert!(selects(&by_label, &team));
        assert!(!selects(&by_label, &labels(&[("team", "web")])));
        let expressions =
            |requirements| LabelSelector { match_expressions: Some(requirements), ..Default::default() };
        assert!(selects(&expressions(vec![requirement("env", "In", &["prod", "dev"])]), &team));
        assert!(!selects(&expressions(vec![requirement("env", "NotIn", &["prod"])]), &team));
        assert!(selects(&expressions(vec![requirement("tier", "DoesNotExist", &[])]), &team));
        assert!(!selects(&expressions(vec![requirement("tier", "Exists", &[])]), &team));
        assert!(!selects(&expressions(vec![requirement("env", "Like", &["prod"])]), &team));
    }
}
