//! The translation: route objects and their parents in, each fleet's IR and every status out.

pub mod endpoints;
pub mod envoyroute;
pub mod gateway;
pub mod hosts;
