//! Objects are objects. serde's derived `Deserialize` also reads a struct from a JSON array
//! (its fields in order), so `[]` would pass as an empty heartbeat and `"hostMetrics": [1, 2]`
//! as two host metrics. The protocol's objects are read with [`objects_only!`] instead: the
//! derive is kept (as `#[serde(remote = "Self")]`, which makes its functions inherent) and
//! the trait impls ask the deserializer for a map, so anything else is refused with
//! "expected a JSON object", and serde_path_to_error still names the field inside.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, MapAccess, Visitor};

/// A type whose derived field reader is callable by name (the `remote = "Self"` derive).
pub trait FromFields<'de>: Sized {
    fn from_fields<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

/// The visitor that takes a map and nothing else.
pub struct ObjectOnly<T>(pub PhantomData<T>);

impl<'de, T: FromFields<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::from_fields(MapAccessDeserializer::new(map))
    }
}

/// `Serialize` and `Deserialize` for types derived with `#[serde(remote = "Self")]`:
/// written as derived, read only from a JSON object.
macro_rules! objects_only {
    ($($t:ty),* $(,)?) => {$(
        impl<'de> $crate::object::FromFields<'de> for $t {
            fn from_fields<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$t>::deserialize(d)
            }
        }
        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_map($crate::object::ObjectOnly::<$t>(std::marker::PhantomData))
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$t>::serialize(self, s)
            }
        }
    )*};
}
pub(crate) use objects_only;
