//! Resource quantities (`100m`, `64Mi`, `1.5`, `2e3`). Every call site holds k8s-openapi's
//! [`Quantity`]; this module is the one parser and the one comparison of requests and limits.
//!
//! Hand-written rather than `kube_quantity`: that crate also accepts what the API server
//! refuses (`Mi`, `inf`, `nan`), and a check that passes offline must hold in the cluster.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use regex::Regex;

static QUANTITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|Ki|Mi|Gi|Ti|Pi|Ei)?$")
        .unwrap_or_else(|e| panic!("built-in quantity pattern must compile: {e}"))
});

/// The API server's message for a quantity it cannot parse.
const INVALID: &str = "must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A quantity's value as a number, for comparisons.
pub fn parse(value: &str) -> Result<f64, String> {
    let captures = QUANTITY.captures(value).ok_or_else(|| INVALID.to_owned())?;
    let number: f64 = captures[1].parse().map_err(|_| INVALID.to_owned())?;
    let scale = match captures.get(2).map(|m| m.as_str()) {
        None => 1.0,
        Some("n") => 1e-9,
        Some("u") => 1e-6,
        Some("m") => 1e-3,
        Some("k") => 1e3,
        Some("M") => 1e6,
        Some("G") => 1e9,
        Some("T") => 1e12,
        Some("P") => 1e15,
        Some("E") => 1e18,
        Some("Ki") => 1024f64,
        Some("Mi") => 1024f64.powi(2),
        Some("Gi") => 1024f64.powi(3),
        Some("Ti") => 1024f64.powi(4),
        Some("Pi") => 1024f64.powi(5),
        Some("Ei") => 1024f64.powi(6),
        Some(exponent) => {
            let power: i32 = exponent[1..].parse().map_err(|_| INVALID.to_owned())?;
            10f64.powi(power)
        }
    };
    Ok(number * scale)
}

/// A quantity no resource may be: unparsable or negative.
pub fn check(quantity: &Quantity) -> Result<f64, String> {
    let value = parse(&quantity.0)?;
    if value < 0.0 { Err("must be greater than or equal to 0".to_owned()) } else { Ok(value) }
}

/// Whether two quantities have the same value (`0.5` and `500m`): the API server stores
/// quantities canonicalized, so text comparison would see drift that is not there.
pub fn same_value(a: &str, b: &str) -> bool {
    match (parse(a), parse(b)) {
        (Ok(a), Ok(b)) => (a - b).abs() <= f64::EPSILON * a.abs().max(b.abs()).max(1.0),
        _ => false,
    }
}

/// Every resource whose request is above its limit, in resource order. Quantities that do
/// not parse are left out: they have errors of their own.
pub fn requests_over_limits<'a>(
    requests: &'a BTreeMap<String, Quantity>,
    limits: &'a BTreeMap<String, Quantity>,
) -> Vec<(&'a str, &'a Quantity, &'a Quantity)> {
    requests
        .iter()
        .filter_map(|(resource, request)| {
            let limit = limits.get(resource)?;
            let (Ok(request_value), Ok(limit_value)) = (parse(&request.0), parse(&limit.0)) else {
                return None;
            };
            (request_value > limit_value).then_some((resource.as_str(), request, limit))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse("100m"), Ok(0.1));
        assert_eq!(parse("64Mi"), Ok(64.0 * 1024.0 * 1024.0));
        assert_eq!(parse("2e3"), Ok(2000.0));
        assert_eq!(parse("1"), Ok(1.0));
        assert!(parse("lots").is_err());
        assert!(parse("1.2.3").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn requests_above_limits_are_found_per_resource() {
        let map = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                .collect::<BTreeMap<_, _>>()
        };
        let requests = map(&[("cpu", "2"), ("memory", "64Mi"), ("ephemeral-storage", "x")]);
        let limits = map(&[("cpu", "1500m"), ("memory", "1Gi"), ("ephemeral-storage", "1Gi")]);
        let over = requests_over_limits(&requests, &limits);
        assert_eq!(over.len(), 1);
        assert_eq!((over[0].0, over[0].1.0.as_str(), over[0].2.0.as_str()), ("cpu", "2", "1500m"));
        assert!(same_value("0.5", "500m"));
        assert!(!same_value("0.5", "600m"));
    }
}
