//! What the reconcilers aim for, as pure functions: the children of a Foo (a Deployment) and
//! of an Envoy (bootstrap ConfigMap, Deployment, Service), the status each parent should
//! report, whether a cached child already matches, and what `render` prints.

pub mod apply;
pub mod envoy;
pub mod foo;
pub mod install;
pub mod labels;
pub mod mesh;
pub mod render;
pub mod report;
pub mod status;
