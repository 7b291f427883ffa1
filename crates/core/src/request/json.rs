//! Streaming canonical JSON digests for request fingerprints, the document reader (the
//! configuration, the conformance vectors), JSON pointers and the one JSON string writer: the
//! crate `idemgate-json`, here at the path hosts use. Its documentation has the digest's
//! definition (`E(value)`) and which error wins.

pub(crate) use idemgate_json::{
    write_escaped, write_string, JsonError, JsonHasher, JsonLimits, JsonPointer, Pointers, Quoted,
    Value,
};
