//! `google.protobuf.Any` in proto3 JSON: `"@type"` (the type URL), then the packed message's
//! own fields. A message that Envoy reads packed says its type URL once, as [`Packable`].

use serde::{Serialize, Serializer};

/// A message Envoy reads from a `google.protobuf.Any`.
pub trait Packable: Serialize {
    /// One of [`super::type_urls`].
    const TYPE_URL: &'static str;
}

/// `message` as an `Any`, for `#[serde(serialize_with = "packed")]` on a typed config.
pub fn packed<M: Packable, S: Serializer>(message: &M, serializer: S) -> Result<S::Ok, S::Error> {
    Packed(message).serialize(serializer)
}

/// A message as an `Any`: `"@type"` first, then its fields.
#[derive(Debug)]
pub struct Packed<'a, M>(pub &'a M);

impl<M: Packable> Serialize for Packed<'_, M> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Fields<'a, M> {
            #[serde(rename = "@type")]
            type_url: &'static str,
            #[serde(flatten)]
            message: &'a M,
        }
        Fields { type_url: M::TYPE_URL, message: self.0 }.serialize(serializer)
    }
}
