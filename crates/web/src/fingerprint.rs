//! The edge's request fingerprint (`docs/semantics.md` §3), fed incrementally: configure and
//! describe the request in one call, stream the body, finish. The same modes and the same bytes as
//! the Envoy filter, because both call `idemgate_core::request::fingerprint` — over the same method
//! and path spelling, because both take it from `idemgate_core::request::target` (browser-edge
//! parity: `post /Orders` from a browser is the edge's `POST /orders`).

use crate::error::{CodedError, JsResult, FINGERPRINTER_STATE, INVALID_ARGUMENT};
use alloc::string::String;
use alloc::vec::Vec;
use idemgate_core::request::fingerprint::{FingerprintBuilder, FingerprintMode, FingerprintSpec};
use idemgate_json::JsonPointer;
use wasm_bindgen::prelude::*;

/// Incremental fingerprint, configured and described in one call, then fed the body. In JS:
///
/// ```js
/// // parts: method (as the app gives it to fetch), path with query, `fields` JSON pointers,
/// // `names` header names, then the request's headers as name, value pairs; joined into one
/// // buffer, with their byte lengths.
/// const fp = new Fingerprinter(mode, maxDepth, maxNumberLen, caseSensitive, joined, lengths,
///                              fields, names);
/// fp.update(chunk); fp.update(chunk2);            // body, in any split
/// fp.finish();                                    // 64 hex digits
/// ```
///
/// `undefined` for `mode`, a limit, `caseSensitive` or `names` means the core's default (`auto`,
/// 64, 64, a case-insensitive route, and `content-type`). `caseSensitive` is the edge route's
/// setting: the path is hashed as that route spells it. One export instead of one per setting
/// keeps the JS glue small.
#[wasm_bindgen]
pub struct Fingerprinter {
    builder: Option<FingerprintBuilder>,
}

/// The arguments of [`Fingerprinter::new`] after splitting.
pub struct Setup<'a> {
    pub mode: Option<&'a str>,
    pub max_depth: Option<u16>,
    pub max_number_len: Option<u16>,
    pub case_sensitive: Option<bool>,
    pub parts: &'a [&'a [u8]],
    pub fields: u32,
    pub names: Option<u32>,
}

#[wasm_bindgen]
impl Fingerprinter {
    /// A fingerprinter for one request (see the type's documentation for the arguments). Throws
    /// `invalid_argument` for an unknown mode, fields outside `fields` mode or parts that do not
    /// add up, `json_pointer_invalid` for a field that is not an RFC 6901 pointer.
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)] // one flat, harness-callable call per request
    pub fn new(
        mode: Option<String>,
        max_depth: Option<u16>,
        max_number_len: Option<u16>,
        case_sensitive: Option<bool>,
        joined: &[u8],
        lengths: &[u32],
        fields: u32,
        names: Option<u32>,
    ) -> JsResult<Fingerprinter> {
        let parts = crate::parts::split(joined, lengths)?;
        let setup = Setup {
            mode: mode.as_deref(),
            max_depth,
            max_number_len,
            case_sensitive,
            parts: &parts,
            fields,
            names,
        };
        Ok(Fingerprinter::start(&setup)?)
    }

    /// Feeds the next body chunk; JSON errors (`json_syntax`, …) are reported as early as known.
    pub fn update(&mut self, chunk: &[u8]) -> JsResult<()> {
        Ok(self.feed(chunk)?)
    }

    /// Ends the body; returns the fingerprint as 64 lowercase hex digits. The fingerprinter is
    /// spent afterwards (`fingerprinter_state`).
    pub fn finish(&mut self) -> JsResult<String> {
        Ok(self.done()?)
    }
}

impl Fingerprinter {
    pub fn start(setup: &Setup<'_>) -> Result<Fingerprinter, CodedError> {
        let mut spec = FingerprintSpec::default();
        if let Some(mode) = setup.mode {
            spec.mode = match mode {
                "auto" => FingerprintMode::Auto,
                "raw" => FingerprintMode::Raw,
                "json" => FingerprintMode::Json,
                "form" => FingerprintMode::Form,
                "fields" => FingerprintMode::Fields(Vec::new().into()),
                "none" => FingerprintMode::None,
                _ => {
                    return Err(CodedError::new(
                        INVALID_ARGUMENT,
                        "unknown fingerprint mode: use auto, raw, json, form, fields or none",
                    ))
                }
            };
        }
        if let Some(depth) = setup.max_depth {
            spec.json_limits.max_depth = depth;
        }
        if let Some(len) = setup.max_number_len {
            spec.json_limits.max_number_len = len;
        }
        let counts = (setup.fields as usize, setup.names.map(|n| n as usize));
        let named = 2 + counts.0 + counts.1.unwrap_or(0);
        let (Some([method, path]), Some(rest)) = (setup.parts.get(..2), setup.parts.get(named..))
        else {
            return Err(CodedError::new(INVALID_ARGUMENT, "too few parts"));
        };
        if rest.len() % 2 != 0 {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                "a header without a value",
            ));
        }
        let fields = setup.parts.get(2..2 + counts.0).unwrap_or_default();
        if !fields.is_empty() || matches!(spec.mode, FingerprintMode::Fields(_)) {
            let FingerprintMode::Fields(shared) = &mut spec.mode else {
                return Err(CodedError::new(
                    INVALID_ARGUMENT,
                    "fields can only be given in \"fields\" mode",
                ));
            };
            let mut pointers = Vec::with_capacity(fields.len());
            for field in fields {
                let parsed = JsonPointer::parse(crate::parts::text(field)?)
                    .map_err(|e| CodedError::new(e.code(), e.message()))?;
                pointers.push(parsed);
            }
            *shared = pointers.into();
        }
        if counts.1.is_some() {
            let names = setup.parts.get(2 + counts.0..named).unwrap_or_default();
            spec.headers.clear();
            for name in names {
                spec.headers
                    .push(crate::parts::text(name)?.to_ascii_lowercase());
            }
        }
        let mut headers = Vec::with_capacity(rest.len() / 2);
        for pair in rest.chunks_exact(2) {
            headers.push((crate::parts::text(pair[0])?.to_ascii_lowercase(), pair[1]));
        }
        let pairs = headers.iter().map(|(n, v)| (n.as_str(), *v));
        let case_sensitive = setup
            .case_sensitive
            .unwrap_or(idemgate_core::request::target::CASE_SENSITIVE_BY_DEFAULT);
        let target = idemgate_core::request::target::of_fetch(
            crate::parts::text(method)?,
            crate::parts::text(path)?,
            case_sensitive,
        );
        let builder = FingerprintBuilder::new(&spec, target.method, &target.path, pairs);
        Ok(Fingerprinter {
            builder: Some(builder),
        })
    }

    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), CodedError> {
        self.builder
            .as_mut()
            .ok_or_else(spent)?
            .update(chunk)
            .map_err(|e| CodedError::new(e.code(), e.message()))
    }

    pub fn done(&mut self) -> Result<String, CodedError> {
        self.builder
            .take()
            .ok_or_else(spent)?
            .finish()
            .map(|fp| idemgate_core::hash::to_hex(&fp.0))
            .map_err(|e| CodedError::new(e.code(), e.message()))
    }
}

fn spent() -> CodedError {
    CodedError::new(
        FINGERPRINTER_STATE,
        "this fingerprinter has finished; make a new one",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use idemgate_core::request::fingerprint::FingerprintBuilder;

    fn native(spec: &FingerprintSpec, body: &[u8]) -> String {
        let headers = [("content-type", &b"application/json"[..])];
        let mut b = FingerprintBuilder::new(spec, "POST", "/orders?x=1", headers);
        b.update(body).unwrap();
        idemgate_core::hash::to_hex(&b.finish().unwrap().0)
    }

    fn ours(mode: Option<&str>, fields: &[&str], chunks: &[&[u8]]) -> Result<String, &'static str> {
        let mut parts: Vec<&[u8]> = alloc::vec![b"POST", b"/orders?x=1"];
        parts.extend(fields.iter().map(|f| f.as_bytes()));
        parts.extend([&b"Content-Type"[..], b"CONTENT-TYPE", b"application/json"]);
        let setup = Setup {
            mode,
            max_depth: None,
            max_number_len: None,
            case_sensitive: None,
            parts: &parts,
            fields: fields.len() as u32,
            names: Some(1),
        };
        let mut fp = Fingerprinter::start(&setup).map_err(|e| e.code)?;
        for chunk in chunks {
            fp.feed(chunk).map_err(|e| e.code)?;
        }
        fp.done().map_err(|e| e.code)
    }

    #[test]
    fn same_bytes_as_the_core_in_every_mode() {
        let body = br#"{"b":2,"a":[1,{"c":null}]}"#;
        let (left, right) = body.split_at(7);
        for (name, mode) in [
            ("raw", FingerprintMode::Raw),
            ("json", FingerprintMode::Json),
            ("none", FingerprintMode::None),
            ("auto", FingerprintMode::Auto),
        ] {
            let spec = FingerprintSpec {
                mode,
                ..FingerprintSpec::default()
            };
            assert_eq!(
                ours(Some(name), &[], &[left, right]),
                Ok(native(&spec, body)),
                "{name}"
            );
        }
        let spec = FingerprintSpec {
            mode: FingerprintMode::Fields(alloc::vec![JsonPointer::parse("/a/1").unwrap()].into()),
            ..FingerprintSpec::default()
        };
        assert_eq!(
            ours(Some("fields"), &["/a/1"], &[left, right]),
            Ok(native(&spec, body))
        );
        // No mode and no header list: the core's defaults (auto over content-type).
        let parts: [&[u8]; 4] = [
            b"POST",
            b"/orders?x=1",
            b"content-type",
            b"application/json",
        ];
        let setup = Setup {
            mode: None,
            max_depth: None,
            max_number_len: None,
            case_sensitive: None,
            parts: &parts,
            fields: 0,
            names: None,
        };
        let mut fp = Fingerprinter::start(&setup).unwrap();
        fp.feed(body).unwrap();
        assert_eq!(fp.done(), Ok(native(&FingerprintSpec::default(), body)));
    }

    #[test]
    fn errors_and_states() {
        assert_eq!(
            ours(Some("json"), &[], &[b"{\"a\":"]),
            Err("json_unexpected_end")
        );
        assert_eq!(ours(Some("json"), &[], &[b"{,"]), Err("json_syntax"));
        assert_eq!(
            ours(Some("fields"), &["a"], &[]),
            Err("json_pointer_invalid")
        );
        assert_eq!(ours(Some("json"), &["/a"], &[]), Err(INVALID_ARGUMENT));
        assert_eq!(ours(Some("xml"), &[], &[]).err(), Some(INVALID_ARGUMENT));
        let odd: [&[u8]; 3] = [b"POST", b"/", b"content-type"];
        for (parts, names) in [(&odd[..], None), (&odd[..2], Some(1))] {
            let setup = Setup {
                mode: None,
                max_depth: None,
                max_number_len: None,
                case_sensitive: None,
                parts,
                fields: 0,
                names,
            };
            let err = Fingerprinter::start(&setup).err().map(|e| e.code);
            assert_eq!(err, Some(INVALID_ARGUMENT));
        }
        let mut fp = Fingerprinter::start(&Setup {
            mode: Some("raw"),
            max_depth: None,
            max_number_len: None,
            case_sensitive: None,
            parts: &[b"POST", b"/"],
            fields: 0,
            names: None,
        })
        .unwrap();
        fp.feed(b"x").unwrap();
        assert!(fp.done().is_ok());
        assert_eq!(fp.done().map_err(|e| e.code), Err(FINGERPRINTER_STATE));
        assert_eq!(fp.feed(b"x").map_err(|e| e.code), Err(FINGERPRINTER_STATE));
    }
}
