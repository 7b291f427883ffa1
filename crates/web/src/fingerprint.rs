//! The edge's request fingerprint (semantics §3), fed incrementally: configure, describe the
//! request, stream the body, finish. The same modes and the same bytes as the Envoy filter, because
//! both call `idemgate_core::fingerprint`.

use crate::error::{CodedError, JsResult, FINGERPRINTER_STATE, INVALID_ARGUMENT};
use alloc::string::String;
use alloc::vec::Vec;
use idemgate_core::fingerprint::{FingerprintBuilder, FingerprintMode, FingerprintSpec};
use idemgate_core::json::{JsonLimits, JsonPointer};
use wasm_bindgen::prelude::*;

/// What the request looks like; collected until the first body chunk starts the digest.
struct Setup {
    spec: FingerprintSpec,
    /// The `fields` mode's pointers, gathered here and shared into the spec when the digest starts.
    pointers: Vec<JsonPointer>,
    method: String,
    path_and_query: String,
    headers: Vec<(String, Vec<u8>)>,
}

enum State {
    Setup(Setup),
    Running(FingerprintBuilder),
    Finished,
}

/// Incremental fingerprint. In JS:
///
/// ```js
/// const fp = new Fingerprinter("auto");          // "auto" | "raw" | "json" | "form" | "fields" | "none"
/// fp.addHeaderName("content-type");              // the edge's configured header list, in order
/// fp.setRequest("POST", "/orders?x=1");
/// fp.addHeader("content-type", bytes);           // every request header occurrence
/// fp.update(chunk); fp.update(chunk2);            // body, in any split
/// fp.finish();                                    // 64 hex digits
/// ```
#[wasm_bindgen]
pub struct Fingerprinter {
    state: State,
}

#[wasm_bindgen]
impl Fingerprinter {
    /// A fingerprinter in `mode` with no headers configured, the default JSON limits (depth 64,
    /// numbers of 64 bytes) and method `POST`, path `/`.
    #[wasm_bindgen(constructor)]
    pub fn new(mode: &str) -> JsResult<Fingerprinter> {
        Ok(Fingerprinter::with_mode(mode)?)
    }

    /// Adds a JSON pointer (RFC 6901) in `fields` mode; `json_pointer_invalid` if it is not one.
    #[wasm_bindgen(js_name = addField)]
    pub fn add_field(&mut self, pointer: &str) -> JsResult<()> {
        Ok(self.field(pointer)?)
    }

    /// Adds a header name to the configured list (matched case-insensitively, hashed lowercase).
    #[wasm_bindgen(js_name = addHeaderName)]
    pub fn add_header_name(&mut self, name: &str) -> JsResult<()> {
        let setup = self.setup()?;
        setup.spec.headers.push(name.to_ascii_lowercase());
        Ok(())
    }

    /// JSON limits, as configured at the edge.
    #[wasm_bindgen(js_name = setLimits)]
    pub fn set_limits(&mut self, max_depth: u16, max_number_len: u16) -> JsResult<()> {
        self.setup()?.spec.json_limits = JsonLimits {
            max_depth,
            max_number_len,
        };
        Ok(())
    }

    /// The request line: method (as sent, e.g. `POST`) and path with query (as sent).
    #[wasm_bindgen(js_name = setRequest)]
    pub fn set_request(&mut self, method: &str, path_and_query: &str) -> JsResult<()> {
        let setup = self.setup()?;
        setup.method = method.into();
        setup.path_and_query = path_and_query.into();
        Ok(())
    }

    /// One request header occurrence; repeated names keep their order.
    #[wasm_bindgen(js_name = addHeader)]
    pub fn add_header(&mut self, name: &str, value: &[u8]) -> JsResult<()> {
        let setup = self.setup()?;
        setup
            .headers
            .push((name.to_ascii_lowercase(), value.to_vec()));
        Ok(())
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
    pub fn with_mode(mode: &str) -> Result<Fingerprinter, CodedError> {
        let mode = match mode {
            "auto" => FingerprintMode::Auto,
            "raw" => FingerprintMode::Raw,
            "json" => FingerprintMode::Json,
            "form" => FingerprintMode::Form,
            "fields" => FingerprintMode::Fields(Vec::new().into()),
            "none" => FingerprintMode::None,
            other => {
                return Err(CodedError::new(
                    INVALID_ARGUMENT,
                    alloc::format!(
                        "unknown fingerprint mode \"{other}\": use auto, raw, json, form, fields or none"
                    ),
                ))
            }
        };
        let spec = FingerprintSpec {
            mode,
            headers: Vec::new(),
            json_limits: JsonLimits::default(),
        };
        Ok(Fingerprinter {
            state: State::Setup(Setup {
                spec,
                pointers: Vec::new(),
                method: String::from("POST"),
                path_and_query: String::from("/"),
                headers: Vec::new(),
            }),
        })
    }

    fn setup(&mut self) -> Result<&mut Setup, CodedError> {
        match &mut self.state {
            State::Setup(setup) => Ok(setup),
            _ => Err(CodedError::new(
                FINGERPRINTER_STATE,
                "the fingerprinter can only be configured before the first body chunk",
            )),
        }
    }

    pub fn field(&mut self, pointer: &str) -> Result<(), CodedError> {
        let setup = self.setup()?;
        if !matches!(setup.spec.mode, FingerprintMode::Fields(_)) {
            return Err(CodedError::new(
                INVALID_ARGUMENT,
                "fields can only be added in \"fields\" mode",
            ));
        }
        let parsed =
            JsonPointer::parse(pointer).map_err(|e| CodedError::from_core(e.code(), &e))?;
        setup.pointers.push(parsed);
        Ok(())
    }

    fn start(&mut self) -> Result<&mut FingerprintBuilder, CodedError> {
        if let State::Setup(_) = self.state {
            let State::Setup(setup) = core::mem::replace(&mut self.state, State::Finished) else {
                return Err(spent());
            };
            let Setup {
                mut spec,
                pointers,
                method,
                path_and_query,
                headers,
            } = setup;
            if let FingerprintMode::Fields(shared) = &mut spec.mode {
                *shared = pointers.into();
            }
            let pairs = headers.iter().map(|(n, v)| (n.as_str(), v.as_slice()));
            let builder = FingerprintBuilder::new(&spec, &method, &path_and_query, pairs);
            self.state = State::Running(builder);
        }
        match &mut self.state {
            State::Running(builder) => Ok(builder),
            _ => Err(spent()),
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), CodedError> {
        self.start()?
            .update(chunk)
            .map_err(|e| CodedError::from_core(e.code(), &e))
    }

    pub fn done(&mut self) -> Result<String, CodedError> {
        self.start()?;
        match core::mem::replace(&mut self.state, State::Finished) {
            State::Running(builder) => builder
                .finish()
                .map(|fp| idemgate_core::hash::to_hex(&fp.0))
                .map_err(|e| CodedError::from_core(e.code(), &e)),
            _ => Err(spent()),
        }
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
    use idemgate_core::fingerprint::FingerprintBuilder;

    fn native(spec: &FingerprintSpec, body: &[u8]) -> String {
        let headers = [("content-type", &b"application/json"[..])];
        let mut b = FingerprintBuilder::new(spec, "POST", "/orders?x=1", headers);
        b.update(body).unwrap();
        idemgate_core::hash::to_hex(&b.finish().unwrap().0)
    }

    fn ours(mode: &str, fields: &[&str], chunks: &[&[u8]]) -> Result<String, &'static str> {
        let mut fp = Fingerprinter::with_mode(mode).map_err(|e| e.code)?;
        for field in fields {
            fp.field(field).map_err(|e| e.code)?;
        }
        let setup = fp.setup().unwrap();
        setup.spec.headers.push("content-type".into());
        setup.method = "POST".into();
        setup.path_and_query = "/orders?x=1".into();
        setup
            .headers
            .push(("content-type".into(), b"application/json".to_vec()));
        for chunk in chunks {
            fp.feed(chunk).map_err(|e| e.code)?;
        }
        fp.done().map_err(|e| e.code)
    }

    #[test]
    fn same_bytes_as_the_core_in_every_mode() {
        let body = br#"{"b":2,"a":[1,{"c":null}]}"#;
        let (left, right) = body.split_at(7);
        for mode in ["raw", "json", "none"] {
            let spec = FingerprintSpec {
                mode: Fingerprinter::with_mode(mode)
                    .unwrap()
                    .setup()
                    .unwrap()
                    .spec
                    .mode
                    .clone(),
                headers: alloc::vec!["content-type".into()],
                json_limits: JsonLimits::default(),
            };
            assert_eq!(
                ours(mode, &[], &[left, right]),
                Ok(native(&spec, body)),
                "{mode}"
            );
        }
        let spec = FingerprintSpec {
            mode: FingerprintMode::Fields(alloc::vec![JsonPointer::parse("/a/1").unwrap()].into()),
            ..FingerprintSpec::default()
        };
        assert_eq!(
            ours("fields", &["/a/1"], &[left, right]),
            Ok(native(&spec, body))
        );
    }

    #[test]
    fn errors_and_states() {
        assert_eq!(ours("json", &[], &[b"{\"a\":"]), Err("json_unexpected_end"));
        assert_eq!(ours("json", &[], &[b"{,"]), Err("json_syntax"));
        assert_eq!(ours("fields", &["a"], &[]), Err("json_pointer_invalid"));
        assert_eq!(ours("json", &["/a"], &[]), Err(INVALID_ARGUMENT));
        assert_eq!(ours("xml", &[], &[]).err(), Some(INVALID_ARGUMENT));
        let mut fp = Fingerprinter::with_mode("raw").unwrap();
        fp.feed(b"x").unwrap();
        assert_eq!(fp.setup().err().map(|e| e.code), Some(FINGERPRINTER_STATE));
        assert!(fp.done().is_ok());
        assert_eq!(fp.done().map_err(|e| e.code), Err(FINGERPRINTER_STATE));
        assert_eq!(fp.feed(b"x").map_err(|e| e.code), Err(FINGERPRINTER_STATE));
    }
}
