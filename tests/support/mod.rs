//! Test support shared by the integration tests (and the library's unit tests): an in-memory
//! API server and the RBAC authorizer model. Included with `#[path]`, so each user compiles it.

#![allow(dead_code)] // each test crate uses a part of it

pub mod api_path;
pub mod fake_api;
pub mod rbac;
