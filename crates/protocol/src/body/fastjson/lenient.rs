//! [`Lenient`]: a serde `Deserializer` over a parsed JSON tree that types values the way
//! fastjson's field deserializers do, so one adapter makes every body type as tolerant as the
//! Java broker. Used only by `from_json`'s slow path (the strict parse failed).
//!
//! What it accepts beyond serde_json, each where fastjson accepts it:
//! - an enum as its ordinal: a non-negative integer picks the variant with that index. The body
//!   enums are declared in their Java enum's order, so the index is Java's `ordinal()`; an index
//!   past the end lands on the enum's `#[serde(other)]` variant when it has one;
//! - an integer or float inside a string, for numeric fields and integer map keys;
//! - `"true"`/`"false"` and `1`/`0` for booleans;
//! - a number or boolean where a string is expected (fastjson writes it out as text).
//!
//! Everything else is delegated to serde_json's own `&Value` deserializer, so error messages
//! stay serde_json's. Recursion follows the tree, whose depth serde_json's parser bounds (128).

use serde::de::value::U64Deserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::{Error, Number, Value};

/// A JSON value read with fastjson's typing rules (see the module doc).
pub(super) struct Lenient<'de>(pub(super) &'de Value);

/// The number a string holds, when all of it is one (`"12"`, `"-3"`, `"1.5"`); no whitespace.
fn number_in(s: &str) -> Option<Value> {
    s.parse::<Number>().ok().map(Value::Number)
}

macro_rules! lenient_numbers {
    ($($method:ident)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0 {
                Value::String(s) => match number_in(s) {
                    Some(n) => n.$method(visitor),
                    None => Err(de::Error::invalid_value(Unexpected::Str(s), &visitor)),
                },
                other => other.$method(visitor),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Lenient<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(map) => visitor.visit_map(Entries {
                iter: map.iter(),
                value: None,
            }),
            scalar => scalar.deserialize_any(visitor),
        }
    }

    lenient_numbers!(deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_f32 deserialize_f64);

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) if s == "true" => visitor.visit_bool(true),
            Value::String(s) if s == "false" => visitor.visit_bool(false),
            Value::Number(n) if n.as_u64() == Some(1) => visitor.visit_bool(true),
            Value::Number(n) if n.as_u64() == Some(0) => visitor.visit_bool(false),
            other => other.deserialize_bool(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Number(n) => visitor.visit_string(n.to_string()),
            Value::Bool(b) => visitor.visit_string(b.to_string()),
            other => other.deserialize_str(visitor),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0.as_u64() {
            Some(ordinal) => visitor.visit_enum(Ordinal(ordinal)),
            None => self.0.deserialize_enum(name, variants, visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier
    }
}

/// Array elements, each read leniently.
struct Items<'de>(std::slice::Iter<'de, Value>);

impl<'de> SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Lenient(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// Object members: keys through [`Key`], values read leniently.
struct Entries<'de> {
    iter: serde_json::map::Iter<'de>,
    value: Option<&'de Value>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.iter.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(Key(k)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Lenient(v)),
            None => Err(de::Error::custom("map value requested before its key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// An object key: a string, or an integer written as one (`{"0":..}` for `BTreeMap<i64, _>`).
struct Key<'de>(&'de str);

macro_rules! integer_keys {
    ($($method:ident $visit:ident $t:ty)*) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0.parse::<$t>() {
                Ok(n) => visitor.$visit(n),
                Err(_) => Err(de::Error::invalid_value(Unexpected::Str(self.0), &visitor)),
            }
        }
    )*};
}

impl<'de> Deserializer<'de> for Key<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    integer_keys!(deserialize_i8 visit_i8 i8 deserialize_i16 visit_i16 i16
        deserialize_i32 visit_i32 i32 deserialize_i64 visit_i64 i64
        deserialize_u8 visit_u8 u8 deserialize_u16 visit_u16 u16
        deserialize_u32 visit_u32 u32 deserialize_u64 visit_u64 u64);

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    forward_to_deserialize_any! {
        bool i128 u128 f32 f64 char str string bytes byte_buf option unit unit_struct seq
        tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// An enum given as its ordinal: the variant is the one with that index.
struct Ordinal(u64);

impl<'de> EnumAccess<'de> for Ordinal {
    type Error = Error;
    type Variant = UnitOnly;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, UnitOnly), Error> {
        let variant = seed.deserialize(U64Deserializer::<Error>::new(self.0))?;
        Ok((variant, UnitOnly))
    }
}

/// An ordinal names a variant and carries no data, so only unit variants can be read from it.
struct UnitOnly;

impl<'de> VariantAccess<'de> for UnitOnly {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, Error> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"a variant with data",
        ))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, Error> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"a tuple variant",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Error> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"a struct variant",
        ))
    }
}
