//! `envoy-operator render`: the children the reconcilers would apply.
