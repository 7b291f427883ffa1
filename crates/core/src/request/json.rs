//! Streaming canonical JSON digests for request fingerprints, the document reader (the
//! configuration, the conformance vectors) and JSON pointers: the crate `idemgate-json`, here at
//! the path hosts use. Its documentation has the digest's
//! definition (`E(value)`) and which error wins.

pub use idemgate_json::{
    document, JsonError, JsonHasher, JsonLimits, JsonPointer, Number, Pointers, Quoted, Value,
};
