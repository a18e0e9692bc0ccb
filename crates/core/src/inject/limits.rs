//! How much one pod may ask of the injector. Anyone who may create a pod in an injected
//! namespace sends it here, and the API server accepts pods of up to ~1.5 MiB, i.e. tens of
//! thousands of volumes or containers. Every step of injection is linear, and these caps,
//! checked before the work that builds anything, keep even that bounded; far above any real
//! pod, they only turn away abuse (with a message saying how to opt the pod out).

use super::InjectError;
use super::annotations::INJECT_LABEL;
use super::pod::PodView;

/// Containers of all kinds (regular, init, ephemeral) together.
pub const MAX_CONTAINERS: usize = 256;
/// Volumes of the pod.
pub const MAX_VOLUMES: usize = 1024;
/// Ports declared by all containers together.
pub const MAX_CONTAINER_PORTS: usize = 1024;
/// Annotations of the pod (the API server caps their total size at 256 KiB, not their count).
pub const MAX_ANNOTATIONS: usize = 1024;

/// `Err` naming the first cap `pod` exceeds. Counting is cheap (list lengths, one pass over
/// the containers' port lists); nothing is allocated per item.
pub fn check(pod: &PodView<'_>) -> Result<(), InjectError> {
    let containers = pod.containers.len()
        + pod.init_containers.map_or(0, <[_]>::len)
        + pod.ephemeral_containers.map_or(0, <[_]>::len);
    exceeds("containers (regular, init and ephemeral)", containers, MAX_CONTAINERS)?;
    exceeds("volumes", pod.volumes.map_or(0, <[_]>::len), MAX_VOLUMES)?;
    // After the container cap, so this pass is short.
    let ports: usize = pod
        .all_containers()
        .filter_map(|container| container.get("ports").and_then(serde_json::Value::as_array))
        .map(Vec::len)
        .sum();
    exceeds("container ports", ports, MAX_CONTAINER_PORTS)?;
    exceeds("annotations", pod.annotations.map_or(0, serde_json::Map::len), MAX_ANNOTATIONS)
}

fn exceeds(what: &'static str, count: usize, limit: usize) -> Result<(), InjectError> {
    if count > limit {
        return Err(InjectError::TooLarge { what, count, limit, opt_out: INJECT_LABEL });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn pod_with(spec: Value) -> Value {
        json!({"metadata": {}, "spec": spec})
    }

    #[test]
    fn each_cap_is_named() {
        let many = |n: usize, item: &dyn Fn(usize) -> Value| Value::Array((0..n).map(item).collect());
        let container = |i: usize| json!({"name": format!("c{i}")});
        let cases = [
            (pod_with(json!({"containers": many(MAX_CONTAINERS + 1, &container)})), "containers"),
            (
                pod_with(json!({"containers": [{"name": "app"}],
                    "initContainers": many(MAX_CONTAINERS, &container)})),
                "containers",
            ),
            (
                pod_with(json!({"containers": [{"name": "app"}],
                    "volumes": many(MAX_VOLUMES + 1, &|i| json!({"name": format!("v{i}")}))})),
                "volumes",
            ),
            (
                pod_with(json!({"containers": [{"name": "app",
                    "ports": many(MAX_CONTAINER_PORTS + 1, &|i| json!({"containerPort": i}))}]})),
                "container ports",
            ),
        ];
        for (pod, what) in cases {
            let view = PodView::new(&pod).unwrap();
            let error = check(&view).unwrap_err();
            assert!(
                matches!(&error, InjectError::TooLarge { what: w, .. } if w.starts_with(what)),
                "{error}"
            );
            assert!(error.to_string().contains(INJECT_LABEL), "says how to opt out: {error}");
        }
        let annotations: serde_json::Map<String, Value> =
            (0..=MAX_ANNOTATIONS).map(|i| (format!("a{i}"), json!("x"))).collect();
        let pod = json!({"metadata": {"annotations": annotations}, "spec": {"containers": []}});
        assert!(check(&PodView::new(&pod).unwrap()).is_err());
        let fine = pod_with(json!({"containers": many(MAX_CONTAINERS, &container)}));
        assert!(check(&PodView::new(&fine).unwrap()).is_ok());
    }
}
