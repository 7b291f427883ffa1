//! Error texts without `core::fmt`'s machinery: `idemgate-json`'s [`Text`] (its JSON errors write
//! theirs the same way), for the core's errors.

pub(crate) use idemgate_json::text::{message, Text};
