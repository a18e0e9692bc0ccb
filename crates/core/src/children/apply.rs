//! "Does the cluster already hold what we would apply?" A pure comparison of the desired
//! object (the server-side apply body: only the fields we own) with the cached object, so a
//! steady-state reconcile sends nothing. Also what we strip from objects before caching them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

/// Annotations that are large and never read by the reconcilers.
const UNUSED_ANNOTATIONS: [&str; 1] = ["kubectl.kubernetes.io/last-applied-configuration"];

/// Drops what the reconcilers never read before an object enters a cache: `managedFields`
/// (often the largest part of an object) and `kubectl apply`'s copy of the whole object.
pub fn strip_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = &mut meta.annotations {
        for key in UNUSED_ANNOTATIONS {
            annotations.remove(key);
        }
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// True when applying `desired` to `actual` would change something: some field of the
/// desired object is missing from or different in the actual one.
pub fn needs_apply<T: Serialize>(desired: &T, actual: &T) -> bool {
    match (serde_json::to_value(desired), serde_json::to_value(actual)) {
        (Ok(desired), Ok(actual)) => !is_subset(&desired, &actual, None),
        // Unserializable objects cannot be compared: applying is the safe answer.
        _ => true,
    }
}

/// Whether every field of `desired` is in `actual` with the same value. Lists of objects that
/// all have a `name` match by name, as server-side apply merges them (extra entries other
/// managers added are not ours); other lists must match entry by entry. Server-populated
/// fields (defaults, status) are ignored because only `desired`'s fields are looked at.
/// Quantities compare by value: the API server canonicalizes `0.5` to `500m`.
fn is_subset(desired: &Value, actual: &Value, key: Option<&str>) -> bool {
    match (desired, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(k, v)| match have.get(k) {
            Some(h) => is_subset(v, h, Some(k)),
            // An absent list or map in the cluster equals an empty one we would send.
            None => is_empty(v),
        }),
        (Value::Array(want), Value::Array(have)) => match names(want) {
            Some(wanted) => wanted.iter().zip(want).all(|(name, w)| {
                have.iter()
                    .find(|h| h.get("name").and_then(Value::as_str) == Some(name))
                    .is_some_and(|h| is_subset(w, h, None))
            }),
            None => want.len() == have.len() && want.iter().zip(have).all(|(w, h)| is_subset(w, h, None)),
        },
        (Value::String(want), Value::String(have)) if want != have => {
            in_resources(key) && crate::rules::quantity::same_value(want, have)
        }
        (Value::Array(want), Value::Null) => want.is_empty(),
        _ => desired == actual,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

/// The `name` of every entry, when every entry is an object with one.
fn names(list: &[Value]) -> Option<Vec<&str>> {
    list.iter().map(|v| v.get("name").and_then(Value::as_str)).collect()
}

/// Quantity-valued keys live in `requests`/`limits` maps under resource names; we only get
/// the resource name as `key`, so accept the common resource names.
fn in_resources(key: Option<&str>) -> bool {
    matches!(key, Some("cpu" | "memory" | "ephemeral-storage"))
        || key.is_some_and(|k| k.starts_with("hugepages-"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn differs(desired: Value, actual: Value) -> bool {
        needs_apply(&desired, &actual)
    }

    #[test]
    fn server_populated_fields_are_ignored() {
        let desired = json!({"spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}}}});
        let actual = json!({
            "metadata": {"resourceVersion": "7", "uid": "u"},
            "spec": {"replicas": 2, "strategy": {}, "template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1", "imagePullPolicy": "IfNotPresent"}]}}},
            "status": {"replicas": 2}
        });
        assert!(!differs(desired, actual));
    }

    #[test]
    fn drift_in_an_owned_field_is_seen() {
        let desired = json!({"spec": {"replicas": 2}});
        assert!(differs(desired.clone(), json!({"spec": {"replicas": 5}})));
        assert!(differs(desired, json!({"spec": {}})));
        let desired = json!({"c": [{"name": "a", "image": "x"}]});
        assert!(differs(desired.clone(), json!({"c": [{"name": "a", "image": "y"}]})));
        assert!(differs(desired, json!({"c": [{"name": "b", "image": "x"}]})));
    }

    #[test]
    fn named_lists_merge_like_server_side_apply() {
        let desired = json!({"c": [{"name": "a", "image": "x"}]});
        let actual = json!({"c": [{"name": "sidecar", "image": "s"}, {"name": "a", "image": "x"}]});
        assert!(!differs(desired, actual));
    }

    #[test]
    fn plain_lists_must_match_exactly() {
        assert!(differs(json!({"args": ["-c", "x"]}), json!({"args": ["-c", "x", "-l"]})));
        assert!(!differs(json!({"args": ["-c", "x"]}), json!({"args": ["-c", "x"]})));
    }

    #[test]
    fn quantities_compare_by_value() {
        assert!(!differs(json!({"requests": {"cpu": "0.5"}}), json!({"requests": {"cpu": "500m"}})));
        assert!(differs(json!({"requests": {"cpu": "0.5"}}), json!({"requests": {"cpu": "600m"}})));
        // Other strings never compare as numbers.
        assert!(differs(json!({"image": "1"}), json!({"image": "1.0"})));
    }

    #[test]
    fn empty_collections_equal_absent_ones() {
        assert!(!differs(json!({"a": {"labels": {}}}), json!({"a": {}})));
        assert!(differs(json!({"a": {"labels": {"x": "1"}}}), json!({"a": {}})));
    }

    #[test]
    fn stripping_drops_managed_fields_and_last_applied() {
        let mut meta: ObjectMeta = serde_json::from_value(json!({
            "name": "x",
            "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"}
        }))
        .unwrap();
        strip_metadata(&mut meta);
        assert!(meta.managed_fields.is_none());
        assert_eq!(meta.annotations.unwrap().keys().collect::<Vec<_>>(), ["keep"]);
    }
}
