//! The probe filter of `make bench-profile`: the do-nothing filter of `make bench`, plus a chosen
//! number of one kind of proxy-wasm host call per request. Its plugin configuration names the kind
//! and the count (`shared_data=8`, `property=10`, ...; empty is the floor, anything else is
//! refused); Envoy's CPU per request with the calls, less without them, over the count, is what
//! one call costs Envoy: the price list that turns idemgate's counted host calls
//! (`make bench-work`) into time. Never shipped.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType};
use std::cell::Cell;
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(ProbeRoot { probe: Rc::new(Cell::new(Probe::default())) })
    });
}}

/// Which host call a request makes, and how many times.
#[derive(Clone, Copy, Default)]
enum Kind {
    #[default]
    Nothing,
    /// `get_shared_data` then `set_shared_data` conditioned on its CAS (one step of idemgate's
    /// store on one cell), of a value of `value_bytes`, on one of 64 keys.
    SharedData,
    /// `get_property(["source", "address"])` (the peer idemgate scopes by).
    Property,
    /// `set_property` of a short value (idemgate's decision for the access log).
    SetProperty,
    /// `get_http_request_headers` (all pairs: idemgate reads the request's headers once).
    Headers,
    /// `get_http_request_body` of the whole 1 KB body.
    Body,
    /// `get_current_time`.
    Time,
    /// `add_http_response_header`.
    AddHeader,
}

#[derive(Clone, Copy, Default)]
struct Probe {
    kind: Kind,
    count: u32,
    value_bytes: usize,
}

impl Probe {
    /// `kind=count` with an optional `,bytes=N`; empty is no probe (the floor run). Anything
    /// else is `None`: Envoy then refuses the filter, so a misspelt probe is never measured as
    /// a floor and priced at nothing.
    fn parse(text: &str) -> Option<Probe> {
        let mut probe = Probe {
            value_bytes: 200,
            ..Probe::default()
        };
        for part in text.split(',').filter(|part| !part.trim().is_empty()) {
            let (name, value) = part.split_once('=')?;
            let n = value.trim().parse::<u32>().ok()?;
            let kind = match name.trim() {
                "bytes" => {
                    probe.value_bytes = usize::try_from(n).ok()?;
                    continue;
                }
                "shared_data" => Kind::SharedData,
                "property" => Kind::Property,
                "set_property" => Kind::SetProperty,
                "headers" => Kind::Headers,
                "body" => Kind::Body,
                "time" => Kind::Time,
                "add_header" => Kind::AddHeader,
                _ => return None,
            };
            probe.kind = kind;
            probe.count = n;
        }
        Some(probe)
    }
}

struct ProbeRoot {
    probe: Rc<Cell<Probe>>,
}

struct ProbeStream {
    probe: Probe,
    id: u32,
}

impl Context for ProbeRoot {}
impl RootContext for ProbeRoot {
    fn on_configure(&mut self, _: usize) -> bool {
        let text = self.get_plugin_configuration().unwrap_or_default();
        let Some(probe) = std::str::from_utf8(&text).ok().and_then(Probe::parse) else {
            return false;
        };
        self.probe.set(probe);
        true
    }
    fn create_http_context(&self, id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(ProbeStream {
            probe: self.probe.get(),
            id,
        }))
    }
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

impl Context for ProbeStream {}
impl HttpContext for ProbeStream {
    fn on_http_request_headers(&mut self, _: usize, _: bool) -> Action {
        for _ in 0..self.probe.count {
            match self.probe.kind {
                Kind::Headers => drop(self.get_http_request_headers()),
                Kind::Property => drop(self.get_property(vec!["source", "address"])),
                _ => break,
            }
        }
        Action::Continue
    }
    fn on_http_request_body(&mut self, size: usize, end_of_stream: bool) -> Action {
        if !end_of_stream {
            return Action::Continue;
        }
        let value = vec![7u8; self.probe.value_bytes];
        for i in 0..self.probe.count {
            match self.probe.kind {
                Kind::Body => drop(self.get_http_request_body(0, size)),
                Kind::SharedData => {
                    let key = format!("probe-{}-{i}", self.id % 64);
                    let (_, cas) = self.get_shared_data(&key);
                    // The answer is not the point: what the call costs Envoy is.
                    let _ = self.set_shared_data(&key, Some(&value), cas);
                }
                Kind::Time => drop(self.get_current_time()),
                Kind::SetProperty => self.set_property(vec!["probe", "decision"], Some(b"claimed")),
                _ => break,
            }
        }
        Action::Continue
    }
    fn on_http_response_headers(&mut self, _: usize, _: bool) -> Action {
        if let Kind::AddHeader = self.probe.kind {
            for i in 0..self.probe.count {
                self.add_http_response_header(&format!("x-probe-{i}"), "1");
            }
        }
        Action::Continue
    }
}
