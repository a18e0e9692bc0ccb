//! The route model: every route kind read into one neutral, checked form.

pub mod backend;
pub mod conditions;
pub mod events;
