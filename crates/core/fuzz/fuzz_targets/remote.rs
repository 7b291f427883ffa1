//! The remote store's decoders on arbitrary bytes: a request as the store service receives it (one
//! operation or a batch of finishes), a response as the filter receives it, and a value as the
//! service reads it from Redis.
//!
//! Checks: never panics; whatever decodes re-encodes to exactly the input (one spelling per
//! message); deciding a decoded request on a decoded value never panics, and a record it writes
//! decodes again under the same key.
#![no_main]

use idemgate_core::store::remote::{
    apply, Change, Incoming, Request, Response, StoredValue, ValueVersion,
};
use idemgate_core::time::UnixMillis;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = Request::decode(data) {
        assert_eq!(
            request.encode(),
            data,
            "a request re-encodes to other bytes"
        );
    }
    if let Ok(incoming) = Incoming::decode(data) {
        assert_eq!(
            incoming.encode(),
            data,
            "a batch of finishes re-encodes to other bytes"
        );
    }
    if let Ok(response) = Response::decode(data) {
        assert_eq!(
            response.encode(),
            data,
            "a response re-encodes to other bytes"
        );
    }
    // Split the input: a request first (its own length is self-delimiting only by decoding), so
    // try every split point of a short prefix for a request and use the rest as a stored value.
    for split in 0..data.len().min(400) {
        let Ok(request) = Request::decode(&data[..split]) else {
            continue;
        };
        let key = *request.key();
        let current = StoredValue::decode(&key, &data[split..]).ok();
        for now in [
            UnixMillis(0),
            UnixMillis(1_700_000_000_000),
            UnixMillis(u64::MAX),
        ] {
            let (_response, change) = apply(&request, current.as_ref().map(|v| &v.record), now);
            if let Change::Put(record) = change {
                let value = StoredValue {
                    version: ValueVersion([1; 16]),
                    record,
                };
                let bytes = value.encode(&key);
                assert_eq!(StoredValue::decode(&key, &bytes).as_ref(), Ok(&value));
            }
        }
    }
});
