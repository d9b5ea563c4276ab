//! Typed custom headers: RocketMQ's `CommandCustomHeader` classes, read from and written to a
//! command's `extFields` as strings (what Java's `RemotingCommand.makeCustomHeaderToNet` does).
//!
//! Every header has `from_command(&RemotingCommand) -> Result<Self, ProtocolError>` and
//! `write_to(&self, &mut RemotingCommand)`. Parsing follows Java's types: strings as is, ints
//! and longs with `parseInt`/`parseLong` rules (an unparsable number is `InvalidField`), booleans
//! with `Boolean.parseBoolean` (anything but case-insensitive "true" is false, absent is false).
//! A required field that is absent is `MissingField(wire name)`. Names are case-sensitive.
//! Called by broker and name-server handlers; the load generator uses `write_to` on requests.

mod auth;
mod broker;
mod client;
mod controller;
mod namesrv;
mod pop;
mod send;

pub use auth::*;
pub use broker::*;
pub use client::*;
pub use controller::*;
pub use namesrv::*;
pub use pop::*;
pub use send::*;

use super::{ProtocolError, RemotingCommand};

/// How one Java field type travels in extFields.
pub trait HeaderField: Sized {
    /// Reads the field named `name`; absent is an error only for required types.
    fn read(cmd: &RemotingCommand, name: &'static str) -> Result<Self, ProtocolError>;
    /// Writes the field; `None` writes nothing (Java omits null fields).
    fn write(&self, cmd: &mut RemotingCommand, name: &str);
}

/// Parses a present value as a Java type (the `Option` layer handles absence).
pub trait HeaderValue: Sized {
    fn parse(raw: &str, name: &'static str) -> Result<Self, ProtocolError>;
    fn render(&self) -> String;
}

fn invalid(name: &'static str, raw: &str) -> ProtocolError {
    // Bound the echoed value: it comes from the network and ends up in logs and remarks.
    ProtocolError::InvalidField {
        name,
        value: raw.chars().take(64).collect(),
    }
}

impl HeaderValue for String {
    fn parse(raw: &str, _: &'static str) -> Result<Self, ProtocolError> {
        Ok(raw.to_owned())
    }
    fn render(&self) -> String {
        self.clone()
    }
}

impl HeaderValue for i32 {
    fn parse(raw: &str, name: &'static str) -> Result<Self, ProtocolError> {
        raw.parse().map_err(|_| invalid(name, raw))
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl HeaderValue for i64 {
    fn parse(raw: &str, name: &'static str) -> Result<Self, ProtocolError> {
        raw.parse().map_err(|_| invalid(name, raw))
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

impl HeaderValue for bool {
    /// `Boolean.parseBoolean`: never fails.
    fn parse(raw: &str, _: &'static str) -> Result<Self, ProtocolError> {
        Ok(raw.eq_ignore_ascii_case("true"))
    }
    fn render(&self) -> String {
        self.to_string()
    }
}

/// Required fields: String, i32, i64.
macro_rules! required_field {
    ($($t:ty),*) => {$(
        impl HeaderField for $t {
            fn read(cmd: &RemotingCommand, name: &'static str) -> Result<Self, ProtocolError> {
                let raw = cmd.ext(name).ok_or(ProtocolError::MissingField(name))?;
                <$t as HeaderValue>::parse(raw, name)
            }
            fn write(&self, cmd: &mut RemotingCommand, name: &str) {
                cmd.ext_fields.insert(name, &self.render());
            }
        }
    )*};
}
required_field!(String, i32, i64);

/// A Java primitive boolean: absent reads as false.
impl HeaderField for bool {
    fn read(cmd: &RemotingCommand, name: &'static str) -> Result<Self, ProtocolError> {
        Ok(cmd
            .ext(name)
            .is_some_and(|v| v.eq_ignore_ascii_case("true")))
    }
    fn write(&self, cmd: &mut RemotingCommand, name: &str) {
        cmd.ext_fields.insert(name, &self.render());
    }
}

impl<T: HeaderValue> HeaderField for Option<T> {
    fn read(cmd: &RemotingCommand, name: &'static str) -> Result<Self, ProtocolError> {
        cmd.ext(name).map(|raw| T::parse(raw, name)).transpose()
    }
    fn write(&self, cmd: &mut RemotingCommand, name: &str) {
        if let Some(v) = self {
            cmd.ext_fields.insert(name, &v.render());
        }
    }
}

/// Reads a field, or its default when absent (`field: ty => "wire" or default`).
macro_rules! read_field {
    ($cmd:expr, $ty:ty, $wire:literal) => {
        <$ty as $crate::headers::HeaderField>::read($cmd, $wire)?
    };
    ($cmd:expr, $ty:ty, $wire:literal, $default:expr) => {
        <Option<$ty> as $crate::headers::HeaderField>::read($cmd, $wire)?
            .unwrap_or_else(|| $default)
    };
}
pub(crate) use read_field;

/// Declares a header struct whose fields map one-to-one onto extFields entries, with
/// `from_command` and `write_to`. `or default` makes a field optional on the wire.
macro_rules! ext_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* pub $field:ident : $ty:ty => $wire:literal $(or $default:expr)? ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $name {
            pub fn from_command(
                cmd: &$crate::RemotingCommand,
            ) -> Result<Self, $crate::ProtocolError> {
                Ok(Self {
                    $( $field: $crate::headers::read_field!(cmd, $ty, $wire $(, $default)?), )*
                })
            }

            pub fn write_to(&self, cmd: &mut $crate::RemotingCommand) {
                $( $crate::headers::HeaderField::write(&self.$field, cmd, $wire); )*
            }
        }
    };
}
pub(crate) use ext_header;

#[cfg(test)]
mod tests;
