//! The do-nothing proxy-wasm HTTP filter of `make bench`: variant (a′), the V8 floor. It is loaded
//! exactly like idemgate (same runtime, same chain with the buffer filter) but every callback
//! continues at once, so what it costs is what any wasm filter costs before doing any work.
//! Built by `make bench` / `make test-bench` as `target/wasm32-wasip1/release/examples/noop_filter.wasm`.

use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::ContextType;

proxy_wasm::main! {{
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(NoopRoot) });
}}

struct NoopRoot;
struct Noop;

impl Context for NoopRoot {}
impl RootContext for NoopRoot {
    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Noop))
    }
    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

impl Context for Noop {}
impl HttpContext for Noop {}
